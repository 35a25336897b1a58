"""The projection log: every event a client sees, with a gapless `seq` per conversation (DESIGN §1.5).

Every app that projects something (runtime's runs, tools' calls and device invocations) appends through
here, inside its own transaction; the push to live subscribers goes out only after that commits.
"""

import threading
from contextlib import contextmanager

from psycopg.types.json import Jsonb

from impo import telemetry
from impo.database import prepared_cursor
from runtime import outbound
from runtime.models import Event, Run
from runtime.projection import event_to_wire

_batch = threading.local()


@contextmanager
def batched():
    """Events appended inside are written when it ends: one sequence allocation and one insert per conversation.

    For a transaction that appends several events (a worker applying one read of the provider); it must end
    inside that transaction, and nothing inside may need the inserted rows. Nested uses join the outer one.
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
    by_conversation: dict = {}
    for conversation_id, submission_id, items in pending:
        by_conversation.setdefault(conversation_id, []).extend((submission_id, item) for item in items)
    for conversation_id, entries in by_conversation.items():
        _write(conversation_id, entries)


def append_events(conversation_id, submission_id, items: list[tuple[str, dict]]) -> None:
    """Persists events with the conversation's next `seq` values; pushes them after commit."""
    if not items:
        return
    pending = getattr(_batch, "pending", None)
    if pending is not None:
        pending.append((conversation_id, submission_id, items))
        return
    _write(conversation_id, [(submission_id, item) for item in items])


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


def _write(conversation_id, entries: list[tuple[object, tuple[str, dict]]]) -> None:
    """Allocates the seqs and inserts the events in one statement."""
    submission_ids = [submission_id for submission_id, _ in entries]
    types = [str(event_type) for _, (event_type, _) in entries]
    payloads = [Jsonb(payload) for _, (_, payload) in entries]
    traces = {submission_id: _trace_id(submission_id) for submission_id in set(submission_ids)}
    with prepared_cursor() as cursor:
        cursor.execute(
            f"WITH allocated AS ({sequence_allocation('c.id = %(conversation)s::uuid', events='%(count)s::bigint')})"
            " INSERT INTO runtime_event (conversation_id, seq, type, submission_id, payload, trace_id, created_at)"
            " SELECT %(conversation)s::uuid, allocated.event_seq - %(count)s::bigint + entry.position, entry.type,"
            "        entry.submission_id,"
            "        entry.payload, entry.trace_id, clock_timestamp()"
            " FROM allocated, unnest(%(types)s::text[], %(submissions)s::uuid[], %(payloads)s::jsonb[],"
            "                        %(traces)s::text[])"
            "      WITH ORDINALITY AS entry(type, submission_id, payload, trace_id, position)"
            " RETURNING seq, id, created_at",
            {
                "count": len(entries),
                "conversation": conversation_id,
                "types": types,
                "submissions": submission_ids,
                "payloads": payloads,
                "traces": [traces[submission_id] for submission_id in submission_ids],
            },
        )
        # In seq order, which is the entries' order.
        rows = sorted(cursor.fetchall())
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
        for (seq, event_id, created_at), (submission_id, (event_type, payload)) in zip(rows, entries, strict=True)
    ]
    outbound.publish_events(conversation_id, [event_to_wire(event) for event in events])


def _trace_id(submission_id) -> str:
    """The trace of the run the events belong to.

    Inside a span it is the current trace: every span of a run continues the run's persisted context. Outside
    one (a cancel, a staff decision, the sweeper) it is read from the run.
    """
    if not telemetry.enabled():
        return ""
    current = telemetry.current_trace_id()
    if current or submission_id is None:
        return current
    traceparent = Run.objects.filter(submission_id=submission_id).values_list("traceparent", flat=True).first()
    return telemetry.trace_id_of(traceparent or "")
