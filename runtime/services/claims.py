"""The claim rule, claims, fenced writes, heartbeats and releases: who may drive a run, and proof that it still may.

The claim rule is stated here once, as conditions over a Run row (ORM `Q`s, evaluated by the database's clock).
The claim statement is compiled from them, the settling of runs that may never be claimed is filtered by them, and
the sweeper and `/metrics` count with them.
"""

import functools
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now
from django.utils import timezone

from core.error_codes import ErrorCode, RunError
from runtime import locks
from runtime.events import announce_written, batched, by_conversation, trace_id, written_sql
from runtime.models import LEASED_RUN_STATES, UNFINISHED_RUN_STATES, EventType, Run, RunState
from runtime.services import lifecycle, projection
from runtime.services.lifecycle import FencedRun

# --- the claim rule -----------------------------------------------------------------------------------
# A run may be claimed now when it is due (queued and not backing off, or leased under an expired lease), was not
# cancelled before its input left, has attempts left, and no run admitted before it in its conversation is
# unfinished (one writer per conversation; "unfinished" is `UNFINISHED_RUN_STATES`).


def backing_off() -> Q:
    """Queued, but waiting out a provider outage's backoff."""
    return Q(state=RunState.QUEUED, not_before__gt=Now())


def queued_and_ready() -> Q:
    return Q(state=RunState.QUEUED) & ~backing_off()


def lease_expired() -> Q:
    return Q(state__in=LEASED_RUN_STATES) & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))


def due() -> Q:
    return queued_and_ready() | lease_expired()


def cancelled_before_input() -> Q:
    """Its cancel came before its input left: it ends here, without a worker or the provider."""
    return Q(cancel_requested_at__isnull=False, input_sent_at__isnull=True)


def out_of_attempts() -> Q:
    return Q(attempts__gte=settings.IMPO_RUN_MAX_ATTEMPTS)


def earlier_run_unfinished() -> Exists:
    """One writer per conversation: a run waits while any run admitted before it in its conversation is active."""
    return Exists(
        Run.objects.filter(
            submission__conversation_id=OuterRef("submission__conversation_id"),
            submission__user_message__sequence__lt=OuterRef("submission__user_message__sequence"),
            state__in=UNFINISHED_RUN_STATES,
        ).exclude(id=OuterRef("id"))
    )


def claimable() -> Q:
    return due() & ~cancelled_before_input() & ~out_of_attempts() & ~Q(earlier_run_unfinished())


def never_claimable() -> Q:
    """Due and next in its conversation, yet never to be claimed: settled (ended) by the claim instead."""
    return due() & ~Q(earlier_run_unfinished()) & (cancelled_before_input() | out_of_attempts())


# --- claims -------------------------------------------------------------------------------------------


class LeaseLost(Exception):
    """This worker's lease was taken over (or the run finished elsewhere): it must stop writing."""


@dataclass(frozen=True)
class Lease:
    run_id: uuid.UUID
    generation: int
    worker_id: str
    attempt: int


def _lease_duration() -> timedelta:
    return timedelta(seconds=settings.IMPO_RUN_LEASE_SECONDS)


def claim_run(run_id, worker_id: str) -> Lease | None:
    """Takes the run under a fresh lease, or returns None when it is not this worker's to run now."""
    with transaction.atomic(durable=True):
        return claim(run_id, worker_id)


# The lease taken on the candidate the claim rule selects (locked, skipping a run another worker holds), and its
# `run.started` written with it: a claim is one statement.
_STARTED = """
SELECT conversation AS conversation_id, %s::text AS type, submission_id,
       jsonb_build_object('submissionId', submission_id::text, 'attempt', attempts, 'status', %s::text) AS payload,
       %s::text AS trace_id, 1::bigint AS position
FROM leased
"""
_LEASE_UPDATE = f"""
leased AS (
    UPDATE runtime_run run
    SET state = %s::varchar,
        version = run.version + (run.state <> %s::varchar)::int,
        attempts = run.attempts + 1,
        lease_generation = run.lease_generation + 1,
        lease_owner = %s::varchar,
        lease_expires_at = now() + %s::interval,
        not_before = NULL,
        started_at = COALESCE(run.started_at, now()),
        updated_at = now()
    FROM candidate
    WHERE run.id = candidate.id
    RETURNING candidate.conversation, run.submission_id, run.attempts, run.lease_generation
),
{written_sql(_STARTED)}
SELECT leased.conversation, leased.submission_id, leased.attempts, leased.lease_generation,
       written.seq, written.id, written.created_at
FROM leased CROSS JOIN written
"""


def claim(run_id, worker_id: str) -> Lease | None:
    """`claim_run` inside the caller's transaction, for a worker that reads what it needs under the same claim.

    A run the statement does not take is either not claimable now, or never will be (then it is ended here), or
    was held by another transaction for a moment (then the statement, run again, takes it if it is free now).
    """
    lease = _claim_statement(run_id, worker_id)
    if lease is None and not _settle_never_claimable(run_id):
        lease = _claim_statement(run_id, worker_id)
    return lease


@functools.cache
def _claim_sql(max_attempts: int) -> tuple[str, tuple]:
    """The claim statement's SQL and its fixed parameters, compiled from the claim rule once per process (and
    per attempt limit, a setting): compiling the ORM query cost more than running it. The run comes first, as a
    parameter of its own, so the compiled candidate names no run."""
    candidate = (
        locks.locking_runs(skip_locked=True)
        .filter(Q(id=RawSQL("(SELECT id FROM target)", ())) & claimable())
        .values("id", conversation=F("submission__conversation_id"))
    )
    candidate_sql, candidate_params = candidate.query.sql_with_params()
    return f"WITH target AS (SELECT %s::uuid AS id), candidate AS ({candidate_sql}), {_LEASE_UPDATE}", candidate_params


def _claim_statement(run_id, worker_id: str) -> Lease | None:
    sql, candidate_params = _claim_sql(settings.IMPO_RUN_MAX_ATTEMPTS)
    trace = trace_id(id=run_id)
    leasing = [RunState.RUNNING, RunState.RUNNING, worker_id, _lease_duration()]
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, *candidate_params, *leasing, EventType.RUN_STARTED, RunState.RUNNING, trace])
        row = cursor.fetchone()
    if row is None:
        return None
    conversation_id, submission_id, attempt, generation, *written = row
    started = {"submissionId": str(submission_id), "attempt": attempt, "status": RunState.RUNNING}
    announce_written(
        by_conversation([(conversation_id, submission_id, [(EventType.RUN_STARTED, started)])]),
        {submission_id: trace},
        [(conversation_id, *written)],
    )
    # As a UUID whatever the caller passed (a Celery task carries it as a string): leases are keyed by it.
    return Lease(run_id=uuid.UUID(str(run_id)), generation=generation, worker_id=worker_id, attempt=attempt)


def _settle_never_claimable(run_id) -> bool:
    """Ends the run if it is due but may never be claimed; True if it did (or the run is someone else's now)."""
    run = (
        locks.locking_runs(skip_locked=True, related=("submission",))
        .annotate(cancelled=ExpressionWrapper(cancelled_before_input(), output_field=BooleanField()))
        .filter(Q(id=run_id) & never_claimable())
        .first()
    )
    if run is None:
        return False
    now = timezone.now()
    if run.cancelled:
        lifecycle.finish(run, RunState.CANCELLED, now=now)
    else:
        cause = run.error_message or "no cause recorded"
        message = f"gave up after {run.attempts} attempts; last: {cause}"
        lifecycle.finish(run, RunState.FAILED, now=now, error=RunError(ErrorCode.MAX_ATTEMPTS_EXCEEDED, message))
    run.save()
    return True


# --- fenced writes --------------------------------------------------------------------------------------


@contextmanager
def fenced(lease: Lease):
    """One durable transaction in which this worker may write, if and only if it still holds the lease.

    The locking read checks the fencing token and keeps a would-be successor out until this transaction ends.
    The block gets a read-only view of the run: it changes the run only through `lifecycle`, and the run is
    written at the end only if something changed. Events appended inside are
    written together (one sequence allocation, one insert).
    """
    with transaction.atomic(durable=True):
        run = locks.lock_leased_run(lease.run_id, generation=lease.generation, leased_states=LEASED_RUN_STATES)
        if run is None:
            raise LeaseLost(f"run {lease.run_id}: generation {lease.generation} is no longer current")
        before = _field_values(run)
        with batched():
            yield FencedRun(run)
        changed = [name for name, value in _field_values(run).items() if value != before[name]]
        if changed:
            run.save(update_fields=[*changed, "updated_at"])


@dataclass(frozen=True)
class LeasedOutput:
    """One run's share of a process's group commit: the reply text its driver read since its last projection."""

    lease: Lease
    outputs: list[projection.Output | projection.Progress]


def project_outputs_together(projections: list[LeasedOutput]) -> dict:
    """Inside the caller's transaction, the projections of many runs of one worker process (its group commit).

    Fenced like `fenced`, each by its own run's lease: the runs are locked in id order, and only those whose
    lease is current get their text appended and their events written (one statement for all of each). Returns
    {run id: a read-only view} of the runs projected; a run missing from it lost its lease, and nothing of its
    share was written.
    """
    by_run = {handed.lease.run_id: handed for handed in projections}
    runs = locks.lock_leased_runs(
        {run_id: handed.lease.generation for run_id, handed in by_run.items()},
        leased_states=LEASED_RUN_STATES,
    )
    projection.project_outputs([(run, by_run[run_id].outputs) for run_id, run in runs.items()])
    return {run_id: FencedRun(run) for run_id, run in runs.items()}


def _field_values(run: Run) -> dict:
    return {field.name: getattr(run, field.attname) for field in Run._meta.concrete_fields if not field.primary_key}


# Every lease a worker process holds, extended in one statement, each only under its own generation (the fence).
_EXTEND_LEASES_SQL = """
UPDATE runtime_run run
SET lease_expires_at = now() + %(lease)s, updated_at = now()
FROM unnest(%(runs)s::uuid[], %(generations)s::bigint[]) AS held(id, generation)
WHERE run.id = held.id AND run.lease_generation = held.generation AND run.state = ANY(%(leased)s::varchar[])
RETURNING run.id
"""


def extend_leases(leases: list[Lease]) -> set:
    """The process heartbeat's one statement: extends every lease still current; returns the run ids (as the
    leases hold them) of those that were not (taken over, or the run left its leased states elsewhere): their
    holders must stop writing."""
    if not leases:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            _EXTEND_LEASES_SQL,
            {
                "lease": _lease_duration(),
                "runs": [lease.run_id for lease in leases],
                "generations": [lease.generation for lease in leases],
                "leased": list(LEASED_RUN_STATES),
            },
        )
        extended = {str(row[0]) for row in cursor.fetchall()}
    return {lease.run_id for lease in leases if str(lease.run_id) not in extended}


def finish_run(lease: Lease, state: str, *, error: RunError | None = None) -> None:
    with fenced(lease) as run:
        lifecycle.finish_in_transaction(run, state, error=error)


def release_for_provider(lease: Lease, *, cause: str) -> float:
    """Gives the run back while the provider is unavailable; returns the backoff (see `requeue_for_provider`)."""
    with fenced(lease) as run:
        return lifecycle.requeue_for_provider(run, cause=cause)


def release_after_error(lease: Lease, *, cause: str) -> None:
    """Gives the run back after an unexpected error of our own; the attempt counts, and the cause is kept."""
    with fenced(lease) as run:
        lifecycle.requeue_after_error(run, cause=cause)
