"""A run's binding to the provider (its RemoteTurn): the session its input went to, the turn that input started, and
how much of that turn's reply was projected, written with the projections it counts.
"""

from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from rebyte.models import CreationIntent, RemoteSession, RemoteTurn
from runtime.models import Run


def remote_turn_of(run: Run) -> RemoteTurn:
    """The run's binding, with its session, as `runtime.selectors.run_to_execute` read it; a run without one yet
    gets one unsaved, inserted by its first write (`_save`, `bind_session`), always a fenced one: the lock on the run
    that write takes keeps a successor's claim, which would read or insert the binding, waiting until it commits."""
    try:
        return run.remote_turn
    except RemoteTurn.DoesNotExist:
        return RemoteTurn(run=run)


def _save(remote_turn: RemoteTurn, fields: list[str]) -> None:
    if remote_turn._state.adding:
        remote_turn.save(force_insert=True)
    else:
        remote_turn.save(update_fields=[*fields, "updated_at"])


def unbind_lost_session(run_id) -> None:
    """The run starts over in a new session: its binding to the lost one (and to a turn there) goes, and so does
    the count of what was projected from it, whose text the reply no longer holds (`lifecycle.start_input_over`):
    the new session's first words are the reply's first, with no part break before them."""
    RemoteTurn.objects.filter(run_id=run_id).update(
        session=None,
        baseline_turn_ids=[],
        turn_id="",
        pending_intent=None,
        projected={},
        completed_items=[],
        updated_at=timezone.now(),
    )


def forget_remote_turn(run: Run) -> None:
    """Drops a failed run's binding to its turn when staff retry it: the next attempt starts as a new run would."""
    RemoteTurn.objects.filter(run=run).delete()


# The binding's write and its session's message range in one statement: inserted with the run's first fenced write
# (`remote_turn_of`), or updated when an earlier attempt's write made it.
_SESSION_RANGE_SQL = """
ranged AS (
    UPDATE rebyte_remotesession
    SET first_message_sequence = COALESCE(first_message_sequence, %(user_sequence)s),
        last_message_sequence = %(reply_sequence)s
    WHERE id = %(session)s
)
SELECT id FROM bound
"""
_BIND_INSERT_SQL = (
    """
WITH bound AS (
    INSERT INTO rebyte_remoteturn (run_id, session_id, baseline_turn_ids, turn_id, projected, completed_items,
                                   cancel_sent_at, pending_intent_id, created_at, updated_at)
    VALUES (%(run)s, %(session)s, %(baseline)s, '', '{}'::jsonb, '[]'::jsonb, NULL, NULL, %(now)s, %(now)s)
    RETURNING id
),"""
    + _SESSION_RANGE_SQL
)
_BIND_UPDATE_SQL = (
    """
WITH bound AS (
    UPDATE rebyte_remoteturn
    SET session_id = %(session)s, baseline_turn_ids = %(baseline)s, pending_intent_id = NULL, updated_at = %(now)s
    WHERE id = %(id)s
    RETURNING id
),"""
    + _SESSION_RANGE_SQL
)


def bind_session(
    remote_turn: RemoteTurn, session: RemoteSession, *, baseline_turn_ids: list[str], message_sequences: tuple[int, int]
) -> None:
    """The run's input goes to this session; `message_sequences` are its user message's and its reply's (the reply
    of a regeneration comes later than the message after it)."""
    adding = remote_turn._state.adding
    now = timezone.now()
    user_sequence, reply_sequence = message_sequences
    with connection.cursor() as cursor:
        cursor.execute(
            _BIND_INSERT_SQL if adding else _BIND_UPDATE_SQL,
            {
                "run": remote_turn.run_id,
                "id": remote_turn.pk,
                "session": session.id,
                "baseline": Jsonb(baseline_turn_ids),
                "now": now,
                "user_sequence": user_sequence,
                "reply_sequence": reply_sequence,
            },
        )
        (remote_turn.pk,) = cursor.fetchone()
    remote_turn.session = session
    remote_turn.baseline_turn_ids = baseline_turn_ids
    remote_turn.pending_intent = None
    remote_turn.updated_at = now
    if adding:
        remote_turn.created_at = now
        remote_turn._state.adding = False
        remote_turn._state.db = connection.alias


def note_projected(remote_turn: RemoteTurn, *, turn_id: str, progress: dict[str, tuple[int, bool]]) -> None:
    """The turn found for the run, and how many characters of which items were projected (and which completed),
    written with the projection they describe."""
    note_projected_together([(remote_turn, turn_id, progress)])


# The progress of many runs' turns in one statement (a worker process's group commit of their projections).
_NOTE_PROJECTED_SQL = """
UPDATE rebyte_remoteturn turn
SET turn_id = noted.turn_id, projected = noted.projected, completed_items = noted.completed_items, updated_at = now()
FROM unnest(%(ids)s::bigint[], %(turn_ids)s::varchar[], %(projected)s::jsonb[], %(completed)s::jsonb[])
    AS noted(id, turn_id, projected, completed_items)
WHERE turn.id = noted.id
"""


def note_projected_together(notes: list[tuple[RemoteTurn, str, dict[str, tuple[int, bool]]]]) -> None:
    """`note_projected` for several runs' turns: (remote turn, turn id, progress) each, in the caller's transaction."""
    if not notes:
        return
    for remote_turn, turn_id, progress in notes:
        remote_turn.turn_id = turn_id
        for item_id, (characters, completed) in progress.items():
            remote_turn.projected[item_id] = characters
            if completed and item_id not in remote_turn.completed_items:
                remote_turn.completed_items.append(item_id)
    turns = [remote_turn for remote_turn, _, _ in notes]
    with connection.cursor() as cursor:
        cursor.execute(
            _NOTE_PROJECTED_SQL,
            {
                "ids": [turn.pk for turn in turns],
                "turn_ids": [turn.turn_id for turn in turns],
                "projected": [Jsonb(turn.projected) for turn in turns],
                "completed": [Jsonb(turn.completed_items) for turn in turns],
            },
        )


def note_cancel_sent(remote_turn: RemoteTurn) -> None:
    remote_turn.cancel_sent_at = timezone.now()
    _save(remote_turn, ["cancel_sent_at"])


def wait_for_intent(remote_turn: RemoteTurn, intent: CreationIntent) -> None:
    remote_turn.pending_intent = intent
    _save(remote_turn, ["pending_intent"])
