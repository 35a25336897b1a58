"""The event log: every event a client sees, with a gapless `seq` per conversation (docs/design.md §1.5).

Every app that projects something (runtime's runs, tools' calls and device invocations) appends through
here, inside its own transaction; the push to live subscribers goes out only after that commits.
"""

import threading
from contextlib import contextmanager

from django.db import connection
from psycopg.types.json import Jsonb

from core import telemetry
from runtime import outbound
from runtime.models import RUN_END_EVENTS, Event, EventType, Run
from runtime.wire import event_to_wire

_batch = threading.local()

# The types the webhooks app makes deliveries of (the list in its trigger, webhooks/migrations/0001_webhooks.py): a
# write with one of them rings the webhooks loop.
WEBHOOK_SOURCE_TYPES = RUN_END_EVENTS | {EventType.RUN_PENDING_RECONCILIATION, EventType.TOOL_APPROVAL_REQUESTED}


@contextmanager
def batched():
    """Events appended inside are written when it ends, in one statement whatever their conversations.

    For a transaction that appends several events (a worker applying one read of the provider, a process's group
    commit); it must end inside that transaction, and nothing inside may need the inserted rows. Nested uses join
    the outer one.
    """
    if getattr(_batch, "pending", None) is not None:
        yield
        return
    _batch.pending = []
    try:
        yield
        pending = _batch.pending
    finally:
        _batch.pending = None
    if pending:
        _write(pending)


def append_events(conversation_id, submission_id, items: list[tuple[str, dict]]) -> None:
    """Persists events with the conversation's next `seq` values; pushes them after commit."""
    if not items:
        return
    pending = getattr(_batch, "pending", None)
    if pending is not None:
        pending.append((conversation_id, submission_id, items))
        return
    _write([(conversation_id, submission_id, items)])


def unwritten(submission_id) -> list[tuple[str, dict]]:
    """The events of a submission appended in the current `batched()` block and not written yet, in order."""
    pending = getattr(_batch, "pending", None) or []
    return [item for _, submission, items in pending if str(submission) == str(submission_id) for item in items]


def sequence_allocation(condition: str, *, events: str, messages: str | None = None, source: str = "") -> str:
    """The one allocation of a conversation's sequences, as SQL for a CTE: an UPDATE of the conversation row `c`
    (joined with `source`, under `condition`) that adds `events` event seqs (and `messages` message sequences) and
    returns the last of each as `event_seq` and `message_sequence`, with the conversation's `id`.

    The row lock the UPDATE takes is held to commit, so concurrent writers to one conversation take turns and the
    sequences stay gapless. Every insert of events or messages allocates through it: `_write` here, and the
    admission statement (two messages and one event, on the conditions of its gate).
    """
    messages_sql = f" last_message_sequence = c.last_message_sequence + {messages}," if messages else ""
    from_sql = f" FROM {source}" if source else ""
    return (
        f"UPDATE runtime_conversation c SET last_event_seq = c.last_event_seq + {events},{messages_sql}"
        f" updated_at = now(){from_sql} WHERE {condition}"
        " RETURNING c.id, c.last_event_seq AS event_seq, c.last_message_sequence AS message_sequence"
    )


def written_sql(entry: str) -> str:
    """The CTEs that write events, for a statement of its own or one that makes them with another change (the claim
    and its `run.started`): `entry` (the given query, of conversation_id, type, submission_id, payload, trace_id and
    the position in its conversation's order), their count per conversation, the seqs' allocation, and `written`
    (the insert, returning each event's conversation_id, seq, id and created_at).

    A statement for several conversations locks their rows in no set order: only a process's group commit gives
    several, for runs whose leases it holds (a conversation has one such run), and every other writer locks one
    conversation, so no two transactions wait on each other's conversations.
    """
    allocation = sequence_allocation("c.id = counted.conversation_id", events="counted.count", source="counted")
    return f"""
entry AS ({entry}),
counted AS (SELECT conversation_id, count(*) AS count FROM entry GROUP BY conversation_id),
allocated AS ({allocation}),
written AS (
    INSERT INTO runtime_event (conversation_id, seq, type, submission_id, payload, trace_id, created_at)
    SELECT entry.conversation_id,
           allocated.event_seq - counted.count
               + row_number() OVER (PARTITION BY entry.conversation_id ORDER BY entry.position),
           entry.type, entry.submission_id, entry.payload, entry.trace_id, clock_timestamp()
    FROM entry
    JOIN counted USING (conversation_id)
    JOIN allocated ON allocated.id = entry.conversation_id
    RETURNING conversation_id, seq, id, created_at
)"""


# One statement allocates every conversation's seqs and inserts its events, in the order given per conversation.
_APPENDED = """
SELECT * FROM unnest(%(conversations)s::uuid[], %(types)s::text[], %(submissions)s::uuid[], %(payloads)s::jsonb[],
                     %(traces)s::text[])
    WITH ORDINALITY AS entry(conversation_id, type, submission_id, payload, trace_id, position)
"""
_WRITE_EVENTS_SQL = f"WITH {written_sql(_APPENDED)} SELECT conversation_id, seq, id, created_at FROM written"


def _write(pending: list[tuple[object, object, list[tuple[str, dict]]]]) -> None:
    """[(conversation id, submission id, [(type, payload)])]: allocates the seqs and inserts the events in one
    statement, then pushes each conversation's events after commit, all in one channel-layer call."""
    grouped = by_conversation(pending)
    entries = [
        (conversation_id, submission_id, item)
        for conversation_id, conversation_entries in grouped.items()
        for submission_id, item in conversation_entries
    ]
    traces = {submission_id: trace_id(submission_id=submission_id) for _, submission_id, _ in entries}
    with connection.cursor() as cursor:
        cursor.execute(
            _WRITE_EVENTS_SQL,
            {
                "conversations": [conversation_id for conversation_id, _, _ in entries],
                "types": [str(event_type) for _, _, (event_type, _) in entries],
                "submissions": [submission_id for _, submission_id, _ in entries],
                "payloads": [Jsonb(payload) for _, _, (_, payload) in entries],
                "traces": [traces[submission_id] for _, submission_id, _ in entries],
            },
        )
        rows = cursor.fetchall()
    announce_written(grouped, traces, rows)


def by_conversation(pending: list[tuple[object, object, list[tuple[str, dict]]]]) -> dict:
    """[(conversation id, submission id, [(type, payload)])] as `announce_written` takes them: {str(conversation id):
    [(submission id, (type, payload))] in the order appended}."""
    grouped: dict = {}
    for conversation_id, submission_id, items in pending:
        grouped.setdefault(str(conversation_id), []).extend((submission_id, item) for item in items)
    return grouped


def announce_written(grouped: dict, traces: dict, rows: list) -> None:
    """After a statement wrote `grouped` (as `by_conversation` groups them, in the order written; `traces`:
    {submission id: trace id}), given what its `written` returned: pushes each conversation's events after commit,
    and rings the webhooks for a type they deliver."""
    written: dict = {}
    for conversation_id, seq, event_id, created_at in rows:
        written.setdefault(str(conversation_id), []).append((seq, event_id, created_at))
    wire_events_of = {}
    for conversation_id, conversation_entries in grouped.items():
        # In seq order, which is the entries' order within their conversation.
        conversation_rows = sorted(written[conversation_id])
        events = [
            Event(
                id=event_id,
                conversation_id=conversation_id,
                seq=seq,
                type=event_type,
                submission_id=submission_id,
                payload=payload,
                trace_id=traces[submission_id],
                created_at=created_at,
            )
            for (seq, event_id, created_at), (submission_id, (event_type, payload)) in zip(
                conversation_rows, conversation_entries, strict=True
            )
        ]
        wire_events_of[conversation_id] = [event_to_wire(event) for event in events]
    outbound.publish_events_together(wire_events_of)
    if any(
        event_type in WEBHOOK_SOURCE_TYPES
        for conversation_entries in grouped.values()
        for _, (event_type, _) in conversation_entries
    ):
        outbound.ring_after_commit(outbound.WEBHOOKS_DOORBELL)


def trace_id(**run) -> str:
    """The trace of the run the events belong to (`run`: a filter naming it, `submission_id=` or `id=`).

    Inside a span it is the current trace: every span of a run continues the run's persisted context. Outside
    one (a cancel, a staff decision, the sweeper) it is read from the run.
    """
    if not telemetry.enabled():
        return ""
    current = telemetry.current_trace_id()
    if current or None in run.values():
        return current
    traceparent = Run.objects.filter(**run).values_list("traceparent", flat=True).first()
    return telemetry.trace_id_of(traceparent or "")
