"""Every row lock the project takes on a Run, the runtime's conversation lock, and the lock of an owner's user row.

Order, always: Run rows (several only in id order), then their tool calls and invocations, then the Conversation
row. A worker ending a run holds the run and then appends its event, which locks the conversation; taking them the
other way round could deadlock against it. The global order, every app's rows included, is in docs/locking.md.

One lock mode for Run rows: FOR NO KEY UPDATE, on the run row alone (`of=self`: never the rows a select_related
joins). It conflicts with itself, so two writers of one run take turns exactly as under FOR UPDATE. What FOR UPDATE
would add is making FOR KEY SHARE wait, the lock an insert of a referencing row (a tool call, a creation intent, a
staff action) takes on the run: but no transaction changes a run's id, and every such insert is made by a
transaction that already holds that run's lock, so the stronger mode would only add waits.
"""

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q, QuerySet

from runtime.models import UNFINISHED_RUN_STATES, Run, Submission

RELATED_FOR_WRITES = ("submission",)


def locking_runs(*, skip_locked: bool = False, related: tuple[str, ...] = ()) -> QuerySet:
    """Runs locked as they are read, with the `related` rows they are read with (not locked); `skip_locked` passes
    over runs another transaction holds."""
    runs = Run.objects.select_for_update(no_key=True, skip_locked=skip_locked, of=("self",))
    # An empty select_related() would join every foreign key.
    return runs.select_related(*related) if related else runs


def lock_run(*, related: tuple[str, ...] = RELATED_FOR_WRITES, **lookup) -> Run | None:
    """One run found by `lookup` (its id, its submission, one of its tool calls or invocations), waiting for its
    holder; None when none matches. An owner's request goes through `lock_run_for_owner`."""
    return locking_runs(related=related).filter(**lookup).first()


def lock_run_for_owner(owner, *, related: tuple[str, ...] = RELATED_FOR_WRITES, **lookup) -> Run | None:
    """`lock_run` for an owner's request: another user's run, or one of a deleted conversation, is None."""
    return lock_run(
        related=related, submission__owner=owner, submission__conversation__deleted_at__isnull=True, **lookup
    )


def lock_runs(*, related: tuple[str, ...] = RELATED_FOR_WRITES, **lookup) -> list[Run]:
    """Several runs in one transaction, waiting for each, in id order (the order that cannot deadlock)."""
    return list(locking_runs(related=related).filter(**lookup).order_by("id"))


# The lock of every write a worker makes under its lease (a run's fenced transaction, a process's group commit):
# its SQL is written once, from the models' columns (the ORM compiled its query anew for each write), and prepared
# on its connection. The same lock as `locking_runs`: the run rows alone, FOR NO KEY UPDATE, with their submissions.
_RUN_FIELDS = [field.attname for field in Run._meta.concrete_fields]
_SUBMISSION_FIELDS = [field.attname for field in Submission._meta.concrete_fields]
_LOCK_LEASED_RUNS_SQL = f"""
SELECT {", ".join(f'run."{field.column}"' for field in Run._meta.concrete_fields)},
       {", ".join(f'submission."{field.column}"' for field in Submission._meta.concrete_fields)}
FROM runtime_run run JOIN runtime_submission submission ON submission.id = run.submission_id
WHERE run.id = ANY(%s::uuid[]) AND run.state = ANY(%s::varchar[])
ORDER BY run.id
FOR NO KEY UPDATE OF run
"""


def lock_leased_runs(generations: dict, *, leased_states) -> dict:
    """Several leased runs at once, in id order, each with its submission: {run id: run} for those whose fencing
    token is still the generation given (the others are locked too until the transaction ends, and left out).
    `generations` is keyed by the runs' ids as UUIDs."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_LEASED_RUNS_SQL, [list(generations), list(leased_states)])
        rows = cursor.fetchall()
    locked = {}
    for row in rows:
        run = Run.from_db(connection.alias, _RUN_FIELDS, row[: len(_RUN_FIELDS)])
        run.submission = Submission.from_db(connection.alias, _SUBMISSION_FIELDS, row[len(_RUN_FIELDS) :])
        if run.lease_generation == generations[run.id]:
            locked[run.id] = run
    return locked


def lock_leased_run(run_id, *, generation: int, leased_states) -> Run | None:
    """The run (its id a UUID) while `generation` is its fencing token and a worker holds it; None once the lease
    was taken over."""
    return lock_leased_runs({run_id: generation}, leased_states=leased_states).get(run_id)


def lock_free_runs(
    condition: Q, *, order_by: str, limit: int, related: tuple[str, ...] = RELATED_FOR_WRITES
) -> list[Run]:
    """Up to `limit` runs matching `condition` that nobody holds: the sweeper's batches, which must not queue
    behind a worker (the next pass finds a run skipped now)."""
    return list(locking_runs(skip_locked=True, related=related).filter(condition).order_by(order_by)[:limit])


def lock_unfinished_runs(conversation_id) -> list[Run]:
    """The conversation's unfinished runs, locked in id order, with their submissions."""
    return lock_runs(submission__conversation_id=conversation_id, state__in=UNFINISHED_RUN_STATES)


def lock_conversation(conversation_id) -> str:
    """Locks the conversation row (the lock every event append takes) and returns its message policy.

    While it is held no run of the conversation can start or end (both append an event), so what is read
    about its runs afterwards, in a later statement, stays true until commit.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message_policy FROM runtime_conversation WHERE id = %s FOR NO KEY UPDATE", [conversation_id]
        )
        (policy,) = cursor.fetchone()
    return policy


def lock_conversation_to_read(conversation_id) -> tuple[int, int]:
    """Share-locks the conversation row and returns its `last_event_seq` and `events_compacted_through`.

    FOR SHARE waits for a writer that holds the row (every event append does) and keeps any from taking it until
    commit, so what is read after it in the same transaction is one writer's state, never half of it; readers do not
    wait for each other.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT last_event_seq, events_compacted_through FROM runtime_conversation WHERE id = %s FOR SHARE",
            [conversation_id],
        )
        return cursor.fetchone()


def lock_owner(owner) -> None:
    """Locks the owner's user row: what a per-owner cap (webhook endpoints, scheduled tasks) takes before it counts,
    so two creations cannot both see room for one. No key of a user changes, so rows referencing it (the created
    row itself) are not held up."""
    get_user_model().objects.select_for_update(no_key=True).filter(pk=owner.pk).values_list("pk").first()


# The retention pass's batch (`runtime.services.retention`), as common table expressions of its one statement:
# settled runs not yet compacted, then their conversations, in this module's order; both skipped when held (a run
# staff are retrying, a conversation a writer holds this instant, a batch another machine took), so a batch never
# waits. `taken` is the runs whose conversation was locked too.
SETTLED_RUNS_TO_COMPACT_SQL = """
candidate AS (
    SELECT run.id, run.submission_id, submission.conversation_id
    FROM runtime_run run JOIN runtime_submission submission ON submission.id = run.submission_id
    WHERE run.state = ANY(%(settled)s::varchar[]) AND run.events_compacted_at IS NULL AND run.finished_at < %(cutoff)s
    ORDER BY run.finished_at
    LIMIT %(batch)s
    FOR NO KEY UPDATE OF run SKIP LOCKED
),
held AS (
    SELECT conversation.id FROM runtime_conversation conversation
    WHERE conversation.id IN (SELECT conversation_id FROM candidate)
    FOR NO KEY UPDATE SKIP LOCKED
),
taken AS (SELECT candidate.* FROM candidate JOIN held ON held.id = candidate.conversation_id)
"""
