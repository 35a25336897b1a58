"""Wire shapes of persisted state, shared by REST, the websocket and the live push."""

import copy

from runtime.models import Event, EventType, Message


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


def events_to_wire(events: list[Event]) -> list[dict]:
    """Stored events as every transport sends them, read back from the log: a compacted event's text, which only its
    message row keeps (runtime/services/retention.py), is put back as it was written, one query for them all."""
    message_ids = {message_id for event in events if (message_id := _text_kept_by(event))}
    if not message_ids:
        return [event_to_wire(event) for event in events]
    rows = Message.objects.filter(id__in=message_ids).values_list("id", "text")
    texts = {str(message_id): text for message_id, text in rows}
    return [event_to_wire(_with_text(event, texts)) for event in events]


def _text_kept_by(event: Event) -> str | None:
    """The id of the message row that holds the text this compacted event left out, or None."""
    if event.type == EventType.MESSAGE_COMPLETED and "textRange" in event.payload:
        return event.payload["messageId"]
    user_message = event.payload.get("userMessage") if event.type == EventType.SUBMISSION_ACCEPTED else None
    if user_message is not None and "text" not in user_message:
        return user_message["id"]
    return None


def _with_text(event: Event, texts: dict[str, str]) -> Event:
    message_id = _text_kept_by(event)
    if message_id is None:
        return event
    payload = copy.deepcopy(event.payload)
    text = texts.get(message_id, "")
    if event.type == EventType.MESSAGE_COMPLETED:
        start, end = payload.pop("textRange")
        payload["text"] = text[start:end]
    else:
        payload["userMessage"]["text"] = text
    restored = copy.copy(event)
    restored.payload = payload
    return restored
