"""What the driver reads of one live event: a small record built from the event's decoded JSON.

The SDK reads the live stream (its request, auth, headers, errors, SSE and JSON decoding) but builds no model per
event: building one cost 0.3–0.7 ms of CPU, more than the rest of a delta's path (bench/RESULTS.md). The SDK's
event types stay the contract: the tests check, type by type on every event the double sends, that the SDK's
models validate each event and that this record equals the one read from the model (`from_model` there).

An event of a type the driver does not know keeps its `type` and nothing else, and is ignored downstream, as the
SDK's model of it was.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """`turn_id`: the turn the event is about (a turn event's own turn); `item_id`, `item_type`, `item_role`: the
    item it is about (an item event's own item); `text`: a delta's new text, or the whole text of the summary part,
    summary text or message it starts or ends; `subagent_id`: a turn event's subagent; `summary_index`: a summary
    event's part."""

    type: str
    turn_id: str | None = None
    item_id: str | None = None
    item_type: str | None = None
    item_role: str | None = None
    text: str | None = None
    subagent_id: str | None = None
    summary_index: int | None = None


def _output_text(item: dict) -> str:
    """A message's text as the SDK's `AgentSessionMessage.output_text` joins it."""
    content = item.get("content") or ()
    return "".join(part.get("text") or "" for part in content if part.get("type") == "output_text")


def _text_delta(data: dict) -> LiveEvent:
    return LiveEvent(data["type"], turn_id=data.get("turn_id"), item_id=data.get("item_id"), text=data.get("delta"))


def _turn(data: dict) -> LiveEvent:
    turn = data.get("turn") or {}
    return LiveEvent(data["type"], turn_id=turn.get("id"), subagent_id=turn.get("subagent_id"))


def _item(data: dict) -> LiveEvent:
    item = data.get("item") or {}
    kind, role = item.get("type"), item.get("role")
    text = _output_text(item) if kind == "message" else None
    return LiveEvent(data["type"], data.get("turn_id"), item.get("id"), kind, role, text)


def _summary(field: str):
    def build(data: dict) -> LiveEvent:
        text = data.get(field)
        if field == "part":
            text = (text or {}).get("text")
        return LiveEvent(
            data["type"],
            turn_id=data.get("turn_id"),
            item_id=data.get("item_id"),
            text=text,
            summary_index=data.get("summary_index"),
        )

    return build


_BUILDERS = {
    "agent.session.turn.output_text.delta": _text_delta,
    "agent.session.turn.created": _turn,
    "agent.session.turn.item.added": _item,
    "agent.session.turn.item.done": _item,
    "agent.session.turn.reasoning_summary_part.added": _summary("part"),
    "agent.session.turn.reasoning_summary_text.delta": _summary("delta"),
    "agent.session.turn.reasoning_summary_text.done": _summary("text"),
    "agent.session.turn.reasoning_summary_part.done": _summary("part"),
}


def from_raw(data: object) -> LiveEvent:
    """The record of one decoded event (anything but an object is an event of no known type)."""
    if not isinstance(data, dict):
        return LiveEvent("")
    kind = data.get("type")
    if not isinstance(kind, str):
        return LiveEvent("")
    build = _BUILDERS.get(kind)
    return LiveEvent(kind) if build is None else build(data)
