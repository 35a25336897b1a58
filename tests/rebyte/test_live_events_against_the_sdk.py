"""The live stream's raw path, type by type against the `openai` SDK's models: every event the double sends (a
streamed create with reasoning, a function call answered, a turn failed twice, a turn cancelled) is validated as
the SDK's strict response validation does (its `AgentSessionEvent` union), and the record the driver builds from its
decoded JSON equals the one it would build from that model. The gateway's own reading gives the same records."""

import threading
import uuid

from openai import Stream
from openai.types.beta import AgentSessionEvent
from pydantic import TypeAdapter

from devtools.stack import wait_until
from rebyte.client import user_input
from rebyte.live_event import LiveEvent, from_raw
from tests.rebyte.double_sessions import CURRENT_TIME

# Every event type the double sends (it sends no `error` nor `agent.session.failed` event: see the last test).
DOUBLE_EVENT_TYPES = frozenset(
    {
        "agent.session.created",
        "agent.session.in_progress",
        "agent.session.requires_action",
        "agent.session.idle",
        "agent.session.turn.created",
        "agent.session.turn.in_progress",
        "agent.session.turn.item.added",
        "agent.session.turn.item.done",
        "agent.session.turn.output_text.delta",
        "agent.session.turn.output_text.done",
        "agent.session.turn.reasoning_summary_part.added",
        "agent.session.turn.reasoning_summary_text.delta",
        "agent.session.turn.reasoning_summary_text.done",
        "agent.session.turn.reasoning_summary_part.done",
        "agent.session.turn.completed",
        "agent.session.turn.failed",
        "agent.session.turn.cancelled",
    }
)
SDK_EVENT = TypeAdapter(AgentSessionEvent)  # what the SDK's `_strict_response_validation` validates with
SUMMARY_TEXT = {
    "agent.session.turn.reasoning_summary_part.added": lambda event: event.part.text,
    "agent.session.turn.reasoning_summary_text.delta": lambda event: event.delta,
    "agent.session.turn.reasoning_summary_text.done": lambda event: event.text,
    "agent.session.turn.reasoning_summary_part.done": lambda event: event.part.text,
}


def from_model(event) -> LiveEvent:
    """The driver's record as read from the SDK's model of the event (as the driver read events before)."""
    kind = event.type
    if kind == "agent.session.turn.output_text.delta":
        return LiveEvent(kind, turn_id=event.turn_id, item_id=event.item_id, text=event.delta)
    if kind == "agent.session.turn.created":
        return LiveEvent(kind, turn_id=event.turn.id, subagent_id=event.turn.subagent_id)
    if kind in ("agent.session.turn.item.added", "agent.session.turn.item.done"):
        item = event.item
        # `AgentSessionMessage.output_text`'s join (strict validation makes an assistant's message the SDK's
        # `AgentSessionAssistantMessage`, which has no such property).
        text = (
            "".join(part.text for part in item.content if part.type == "output_text")
            if item.type == "message"
            else None
        )
        return LiveEvent(kind, event.turn_id, item.id, item.type, getattr(item, "role", None), text)
    if kind in SUMMARY_TEXT:
        text = SUMMARY_TEXT[kind](event)
        return LiveEvent(
            kind, turn_id=event.turn_id, item_id=event.item_id, text=text, summary_index=event.summary_index
        )
    return LiveEvent(kind)


def checked(raw: list) -> set[str]:
    """Validates each decoded event as the SDK's model and compares the two records; the types seen."""
    for data in raw:
        model = SDK_EVENT.validate_python(data)
        assert model.type == data["type"]
        assert from_raw(data) == from_model(model), data
    return {data["type"] for data in raw}


def read_turns(events, into: list, turns: int, kind_of) -> None:
    """Appends events up to the session's idle after `turns` turns (the stream stays open otherwise)."""
    idles = 0
    for event in events:
        into.append(event)
        idles += kind_of(event) == "agent.session.idle"
        if idles == turns:
            return


def streamed_create(sdk) -> list:
    """A session created with its stream and a reasoning first turn, read as the gateway reads one (the SDK's
    request and decoding, no model per event): that stream's decoded events."""
    agent = sdk.beta.agents.create(model="rebyte-echo", name="raw", metadata={"k": uuid.uuid4().hex})
    created = sdk.beta.agents.sessions.with_raw_response.create(
        environment={"type": "none"},
        agent_id=agent.id,
        agent={"tools": [CURRENT_TIME], "reasoning": {"summary": "auto"}},
        input=user_input(["think first"]),
        metadata={},
        stream=True,
    ).parse(to=Stream[object])
    first_turn: list = []
    with created:
        read_turns(created, first_turn, 1, lambda data: data["type"])
    return first_turn


def new_key() -> str:
    return f"k-{uuid.uuid4().hex}"


def play(gateway, session_id: str, script: str, live_raw: list) -> None:
    """Sends one turn's script and does what it asks for: answers its function call, cancels it once it speaks."""
    seen = len(live_raw)
    gateway.send_message(session_id, [script], idempotency_key=new_key())
    if script.startswith("/tool"):
        (action,) = wait_until(lambda: gateway.get_session(session_id).required_actions, timeout=20, what="the call")
        gateway.send_tool_result(
            session_id,
            turn_id=action.turn_id,
            call_id=action.call_id,
            success=True,
            text="noon",
            idempotency_key=new_key(),
        )
    if script.startswith("/slow"):
        wait_until(
            lambda: any(d["type"] == "agent.session.turn.output_text.delta" for d in live_raw[seen:]),
            timeout=20,
            what="the slow turn's first delta",
        )
        gateway.send_cancel(session_id, idempotency_key=new_key())
    wait_until(
        lambda: any(d["type"] == "agent.session.idle" for d in live_raw[seen:]), timeout=30, what=f"{script} settled"
    )


def test_every_event_the_double_sends_reads_into_the_record_its_sdk_model_gives(rebyte_double, sdk):
    rebyte_double.configure(reasoning_summaries=True, delta_delay_ms=10, delta_chunks=4)
    first_turn = streamed_create(sdk)
    session_id = first_turn[0]["session"]["id"]

    live_raw, live_records, scripts = [], [], ["/tool current_time", "/fail no", "/busy later", "/slow abcdefghijkl"]
    with rebyte_double.gateway() as gateway, gateway.live_events(session_id) as events:
        stream = sdk.beta.agents.sessions.events.with_raw_response.stream(session_id).parse(to=Stream[object])
        readers = [
            threading.Thread(target=read_turns, args=(stream, live_raw, len(scripts), lambda d: d["type"])),
            threading.Thread(target=read_turns, args=(events, live_records, len(scripts), lambda e: e.type)),
        ]
        for reader in readers:
            reader.start()
        wait_until(lambda: rebyte_double.state()["live_streams"] == {session_id: 2}, timeout=10, what="two streams")
        for script in scripts:
            play(gateway, session_id, script, live_raw)
        for reader in readers:
            reader.join(timeout=20)
        stream.close()

    assert checked(first_turn) | checked(live_raw) == DOUBLE_EVENT_TYPES
    # The gateway read the same events into the same records.
    assert live_records == [from_raw(data) for data in live_raw]
    failed = [SDK_EVENT.validate_python(d) for d in live_raw if d["type"] == "agent.session.turn.failed"]
    assert [event.turn.error.code for event in failed] == ["internal_error", "server_overloaded"]
    items = {d["item"]["type"] for d in live_raw if d["type"].startswith("agent.session.turn.item.")}
    assert {"function_call", "function_call_output", "message", "reasoning"} <= items


def test_an_error_event_and_an_unknown_type_keep_their_type_alone_as_the_driver_ignores_them():
    """The double sends no `error` event (nothing says when the service would): the SDK's model of one, as JSON,
    reads into its type alone, as an event of a type the SDK does not know yet does."""
    error = {
        "type": "error",
        "event_id": "evt_1",
        "session_id": "sess_1",
        "error": {"code": "server_error", "message": "boom", "type": "server_error"},
    }
    assert SDK_EVENT.validate_python(error).type == "error"
    assert from_raw(error) == from_model(SDK_EVENT.validate_python(error)) == LiveEvent("error")
    assert from_raw({"type": "agent.session.turn.something_new", "x": 1}) == LiveEvent(
        "agent.session.turn.something_new"
    )
    assert from_raw([1, 2]) == from_raw({"no": "type"}) == LiveEvent("")
