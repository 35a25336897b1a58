"""The projection log: every event a client sees, with a gapless `seq` per conversation (DESIGN §1.5).

Every app that projects something (runtime's runs, tools' calls and device invocations) appends through
here, inside its own transaction; the push to live subscribers goes out only after that commits.
"""

from django.db import connection

from impo import telemetry
from runtime import outbound
from runtime.models import Event, Run
from runtime.projection import event_to_wire


def append_events(conversation_id, submission_id, items: list[tuple[str, dict]]) -> list[Event]:
    """Persists events with the conversation's next `seq` values; pushes them after commit."""
    if not items:
        return []
    first_seq, _ = allocate_sequences(conversation_id, events=len(items), messages=0)
    trace_id = _trace_id(submission_id)
    events = Event.objects.bulk_create(
        Event(
            conversation_id=conversation_id,
            submission_id=submission_id,
            seq=first_seq + offset,
            type=event_type,
            payload=payload,
            trace_id=trace_id,
        )
        for offset, (event_type, payload) in enumerate(items)
    )
    outbound.publish_events(conversation_id, [event_to_wire(event) for event in events])
    return events


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


def allocate_sequences(conversation_id, *, events: int, messages: int) -> tuple[int, int]:
    """Reserves the next `events` event seqs and `messages` message sequences; returns the first of each.

    The row lock this UPDATE takes is held to commit, so concurrent writers to one conversation
    take turns and the sequences stay gapless.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runtime_conversation"
            " SET last_event_seq = last_event_seq + %s,"
            "     last_message_sequence = last_message_sequence + %s,"
            "     updated_at = now()"
            " WHERE id = %s RETURNING last_event_seq, last_message_sequence",
            [events, messages, conversation_id],
        )
        last_event_seq, last_message_sequence = cursor.fetchone()
    return last_event_seq - events + 1, last_message_sequence - messages + 1
