"""A session created with `stream: true`, judged by the official `openai` SDK with strict response validation: the
answer is the new session's event stream from its creation, with the live stream's pacing, faults and padding."""

import threading
import uuid

import httpx
import openai
import pytest

from devtools.stack import wait_until
from rebyte.client import user_input
from rebyte.failures import UnknownOutcome
from tests.rebyte.double_sessions import read_until_idle

BETA = {"OpenAI-Beta": "agents=v1", "Authorization": "Bearer test-key"}


def streamed_create(sdk, text: str, **options):
    agent = sdk.beta.agents.create(model="rebyte-echo", name="test", metadata={"k": uuid.uuid4().hex})
    return sdk.beta.agents.sessions.create(
        environment={"type": "none"},
        agent_id=agent.id,
        input=user_input([text]),
        metadata={"impo_intent": "i-1"},
        stream=True,
        **options,
    )


def read_turn(stream) -> list:
    """The stream's events up to the session's idle after its first turn ended (the server never ends it)."""
    events = []
    read_until_idle(stream, events)
    return events


def test_a_streamed_create_answers_the_session_first_then_its_first_turn_in_order(sdk, rebyte_double):
    rebyte_double.configure(delta_delay_ms=30, delta_chunks=5)

    events = read_turn(streamed_create(sdk, "hello stream"))

    created = events[0]
    assert created.type == "agent.session.created"
    assert created.session.metadata == {"impo_intent": "i-1"} and created.session.id.startswith("sess_")
    types = [event.type for event in events]
    assert types[1] == "agent.session.turn.created"
    assert types[-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    deltas = [event for event in events if event.type == "agent.session.turn.output_text.delta"]
    assert "".join(event.delta for event in deltas) == "Echo: hello stream"
    assert len(deltas) == 5
    (added,) = [e for e in events if e.type == "agent.session.turn.item.added" and e.item.role == "assistant"]
    assert types.index("agent.session.turn.item.added") < types.index("agent.session.turn.output_text.delta")
    assert {event.item_id for event in deltas} == {added.item.id}
    assert all(event.session_id == created.session.id for event in events[1:] if hasattr(event, "session_id"))
    # Padded by default, as the real service pads its streams.
    assert all(event.obfuscation and event.obfuscation.isalnum() for event in events)
    assert rebyte_double.state()["counts"]["sessions"] == 1
    # Closed by the client, the stream is seen gone upstream.
    wait_until(lambda: rebyte_double.state()["live_streams"] == {}, timeout=10, what="the stream to close upstream")


def test_the_sdk_collects_the_first_turns_result_from_a_streamed_create(sdk):
    result = streamed_create(sdk, "collect me", stream_options={"include_obfuscation": False}).get_final_result()

    assert result.turn.status == "completed"
    assert result.output_text == "Echo: collect me"


def test_padding_is_left_out_when_asked_on_either_stream(sdk, rebyte_double):
    events = read_turn(streamed_create(sdk, "plain", stream_options={"include_obfuscation": False}))
    assert all(event.obfuscation is None for event in events)

    session_id = events[0].session.id
    wait_until(lambda: rebyte_double.state()["live_streams"] == {}, timeout=10, what="the create's stream to close")
    live = sdk.beta.agents.sessions.events.stream(session_id, include_obfuscation=False)
    received = []
    reader = threading.Thread(target=lambda: received.extend(read_turn(live)), daemon=True)
    reader.start()
    # The live stream must be open before the input whose events it should carry.
    wait_until(lambda: rebyte_double.state()["live_streams"] == {session_id: 1}, timeout=10, what="the live stream")
    sdk.beta.agents.sessions.events.create(
        session_id,
        events=[{"type": "agent.session.input.message", "input": user_input(["again"])}],
        idempotency_key="k-1",
    )
    reader.join(timeout=20)
    assert received and all(event.obfuscation is None for event in received)


def test_stream_options_need_stream_true(rebyte_double, sdk):
    agent = sdk.beta.agents.create(model="rebyte-echo")
    body = {"environment": {"type": "none"}, "agent_id": agent.id, "input": user_input(["hi"])}
    with httpx.Client(base_url=rebyte_double.api_url, headers=BETA, timeout=5) as raw:
        refused = raw.post("/agents/sessions", json={**body, "stream_options": {"include_obfuscation": False}})
        unknown_option = raw.post("/agents/sessions", json={**body, "stream": True, "stream_options": {"x": 1}})

    assert (refused.status_code, refused.json()["error"]["param"]) == (400, "stream_options")
    assert unknown_option.status_code == 400
    assert rebyte_double.state()["counts"]["sessions"] == 0


def test_a_streamed_create_is_paced_and_cut_like_the_live_stream(sdk, rebyte_double):
    rebyte_double.configure(delta_delay_ms=50, delta_chunks=8)
    rebyte_double.fault("create_session", "cut_stream", after_events=4)

    stream = streamed_create(sdk, "cut me short")
    received = []
    with pytest.raises(openai.APIConnectionError):
        for event in stream:
            received.append(event)

    assert [event.type for event in received][:2] == ["agent.session.created", "agent.session.turn.created"]
    assert len(received) == 4
    # Cutting the stream ends nothing upstream: the turn runs to its end.
    session_id = received[0].session.id
    wait_until(
        lambda: [t.status for t in sdk.beta.agents.sessions.turns.list(session_id)] == ["completed"],
        timeout=20,
        what="the turn to end",
    )


def test_a_streamed_create_lost_before_its_first_event_is_an_unknown_outcome_that_created(rebyte_double):
    rebyte_double.fault("create_session", "drop_response")
    with rebyte_double.gateway() as gateway:
        agent = gateway.create_agent(model="rebyte-echo", name="n", instructions="i", metadata={})
        with pytest.raises(UnknownOutcome):
            gateway.open_session(agent_id=agent.id, tools=[], input_parts=["hi"], metadata={"impo_intent": "i-2"})

        rebyte_double.fault("create_session", "cut_stream", after_events=0)
        with pytest.raises(UnknownOutcome):
            gateway.open_session(agent_id=agent.id, tools=[], input_parts=["hi"], metadata={"impo_intent": "i-3"})

    assert rebyte_double.state()["counts"]["sessions"] == 2


def test_the_adapter_opens_a_session_on_its_stream_without_padding(rebyte_double):
    with rebyte_double.gateway() as gateway:
        agent = gateway.create_agent(model="rebyte-echo", name="n", instructions="i", metadata={})
        opened = gateway.open_session(agent_id=agent.id, tools=[], input_parts=["ctx", "hi"], metadata={"a": "1"})
        with opened.events as events:
            types = []
            for event in events:
                types.append(event.type)
                if event.type == "agent.session.turn.completed":
                    break

    assert opened.session.metadata == {"a": "1"}
    assert types[0] == "agent.session.turn.created" and "agent.session.turn.output_text.delta" in types
    (create,) = [r for r in rebyte_double.requests() if r["op"] == "create_session"]
    assert create["body"]["stream"] is True
    assert create["body"]["stream_options"] == {"include_obfuscation": False}
    wait_until(lambda: rebyte_double.state()["live_streams"] == {}, timeout=10, what="the stream to close upstream")
