"""Wire shapes of persisted state, shared by REST, the websocket and the live push."""

import copy

from runtime.models import RUN_END_EVENTS, Event, EventType, Submission


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
    """Stored events as every transport sends them, read back from the log: what compaction left out of a settled
    reply's events, because its rows hold it (runtime/services/retention.py), is put back as it was written, from one
    query of their submissions' messages."""
    submission_ids = {event.submission_id for event in events if _compacted(event)}
    if not submission_ids:
        return [event_to_wire(event) for event in events]
    rows = Submission.objects.filter(id__in=submission_ids).values(
        "id",
        "user_message_id",
        "user_message__sequence",
        "user_message__text",
        "assistant_message_id",
        "assistant_message__sequence",
        "assistant_message__text",
    )
    replies = {row["id"]: row for row in rows}
    # A submission deleted since its events were read (its conversation deleted meanwhile) has no rows to read back
    # from: its events go as stored, to a reader about to be told the conversation is gone.
    wire = []
    for event in events:
        reply = replies.get(event.submission_id) if _compacted(event) else None
        wire.append(event_to_wire(_restored(event, reply) if reply else event))
    return wire


def _compacted(event: Event) -> bool:
    """Whether compaction left something out of this event (each writer always writes what is tested for)."""
    payload = event.payload
    if event.type == EventType.SUBMISSION_ACCEPTED:
        return "assistantMessage" not in payload or "text" not in payload["userMessage"]
    if event.type == EventType.MESSAGE_COMPLETED:
        return "textRange" in payload
    return event.type in _CARRYING_THEIR_SUBMISSION and "submissionId" not in payload


_CARRYING_THEIR_SUBMISSION = RUN_END_EVENTS | {EventType.RUN_STARTED}


def _restored(event: Event, reply: dict) -> Event:
    """The compacted event with what it left out put back from its submission's `reply` row (with both messages)."""
    payload = copy.deepcopy(event.payload)
    submission_id = str(event.submission_id)
    reply_id = str(reply["assistant_message_id"])
    if event.type == EventType.SUBMISSION_ACCEPTED:
        asked = payload["userMessage"]
        if "assistantMessage" not in payload:
            payload["submissionId"] = submission_id
            payload["assistantMessage"] = {"id": reply_id, "sequence": reply["assistant_message__sequence"]}
            asked.update(id=str(reply["user_message_id"]), sequence=reply["user_message__sequence"])
        asked["text"] = reply["user_message__text"]
    elif event.type == EventType.MESSAGE_COMPLETED:
        # Only a reply whose parts make its text exactly is ranged: each range is into the reply's text.
        start, end = payload.pop("textRange")
        payload["text"] = reply["assistant_message__text"][start:end]
        payload.setdefault("messageId", reply_id)
    else:
        payload["submissionId"] = submission_id
        if event.type in RUN_END_EVENTS:
            payload["messageId"] = reply_id
    restored = copy.copy(event)
    restored.payload = payload
    return restored
