"""Wire shapes of persisted state, shared by REST, the websocket and the live push."""

from runtime.models import Event


def event_to_wire(event: Event) -> dict:
    """One stored event as every transport sends it; `type` is an `EventType` (docs/api.md, "The websocket"), and a
    `run.progress` event is transient: never part of the reply's text, compacted once its run settled."""
    return {
        "seq": event.seq,
        "type": event.type,
        "conversationId": str(event.conversation_id),
        "submissionId": str(event.submission_id) if event.submission_id else None,
        "payload": event.payload,
        # The run's trace, for support to find its spans; null when tracing was off.
        "traceId": event.trace_id or None,
        "createdAt": event.created_at.isoformat(),
    }
