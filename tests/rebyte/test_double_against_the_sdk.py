"""The Rebyte double, judged by the official `openai` SDK with strict response validation.

No Django here: the double runs as a real process and is reached over real sockets. Every answer the
SDK reads must parse into its generated models; what the SDK cannot express (missing required fields,
extra query parameters) is sent raw with httpx.
"""

import threading

import httpx
import openai
import pytest

from devtools.stack import wait_until
from tests.rebyte.double_sessions import CURRENT_TIME, new_session, read_until_idle, settled_turns, turns_of, user_input

BETA = {"OpenAI-Beta": "agents=v1", "Authorization": "Bearer test-key"}


@pytest.fixture
def double(rebyte_double):
    """The session's double, emptied for this test."""
    return rebyte_double


@pytest.fixture
def raw(double):
    with httpx.Client(base_url=double.api_url, headers=BETA, timeout=5) as client:
        yield client


def assistant_texts(sdk, session_id) -> list[str]:
    items = sdk.beta.agents.sessions.items.list(session_id, order="asc", limit=100)
    return [item.output_text for item in items if item.type == "message" and item.role == "assistant"]


def send_message(sdk, session_id, text, key):
    sdk.beta.agents.sessions.events.create(
        session_id, events=[{"type": "agent.session.input.message", "input": user_input(text)}], idempotency_key=key
    )


# --- agents and sessions ----------------------------------------------------------------------------


def test_an_agent_needs_a_model_and_parses_into_the_sdk_agent(sdk, raw):
    refused = raw.post("/agents", json={"name": "no model"})
    assert refused.status_code == 400
    assert refused.json()["error"].keys() == {"message", "type", "code", "param"}
    assert refused.json()["error"]["param"] == "model"

    agent = sdk.beta.agents.create(model="rebyte-echo", instructions="be brief", metadata={"impo_owner": "1"})

    assert agent.object == "agent"
    assert (agent.model, agent.instructions, agent.metadata) == ("rebyte-echo", "be brief", {"impo_owner": "1"})
    assert sdk.beta.agents.retrieve(agent.id).id == agent.id


def test_a_session_needs_an_environment_and_its_first_input_and_names_its_agent_as_an_object(sdk, raw):
    agent = sdk.beta.agents.create(model="rebyte-echo")
    no_environment = raw.post("/agents/sessions", json={"agent_id": agent.id, "input": user_input("hi")})
    no_input = raw.post("/agents/sessions", json={"agent_id": agent.id, "environment": {"type": "none"}})
    assert (no_environment.status_code, no_input.status_code) == (400, 400)

    session = sdk.beta.agents.sessions.create(
        environment={"type": "none"}, agent_id=agent.id, agent={"tools": [CURRENT_TIME]}, input=user_input("hi")
    )

    assert session.agent.id == agent.id
    assert [tool.name for tool in session.agent.tools] == ["current_time"]
    assert session.environment.type == "none"
    (turn,) = settled_turns(sdk, session.id)
    assert turn.status == "completed"
    assert assistant_texts(sdk, session.id) == ["Echo: hi"]


def test_creates_are_not_idempotent_even_with_a_key(sdk, double, raw):
    agent = sdk.beta.agents.create(model="rebyte-echo")
    body = {"environment": {"type": "none"}, "agent_id": agent.id, "input": user_input("twice")}

    for _ in range(2):
        assert raw.post("/agents/sessions", json=body, headers={"Idempotency-Key": "same"}).status_code == 200

    assert double.state()["counts"]["sessions"] == 2


def test_lists_page_by_the_last_id_and_offer_no_metadata_filter(sdk, raw):
    created = [sdk.beta.agents.create(model="rebyte-echo", metadata={"n": str(n)}).id for n in range(3)]

    listed = [agent.id for agent in sdk.beta.agents.list(limit=1, order="asc")]

    assert listed == created
    assert raw.get("/agents", params={"metadata[n]": "1"}).status_code == 400


def test_a_new_session_shows_in_listings_only_after_the_configured_lag(sdk, double):
    double.configure(listing_lag_ms=800)
    session = new_session(sdk)

    assert [s.id for s in sdk.beta.agents.sessions.list(agent_id=session.agent.id)] == []
    wait_until(
        lambda: [s.id for s in sdk.beta.agents.sessions.list(agent_id=session.agent.id)] == [session.id],
        timeout=10,
        what="the session to be listed",
    )


# --- input events -----------------------------------------------------------------------------------


def test_an_input_event_is_answered_202_with_an_empty_body(sdk, raw):
    session = new_session(sdk)
    settled_turns(sdk, session.id)

    response = raw.post(
        f"/agents/sessions/{session.id}/events",
        json={"events": [{"type": "agent.session.input.message", "input": user_input("again")}]},
        headers={"Idempotency-Key": "k-1"},
    )

    assert (response.status_code, response.content) == (202, b"")
    turns = settled_turns(sdk, session.id, count=2)
    assert assistant_texts(sdk, session.id) == ["Echo: hello", "Echo: again"]
    assert len(turns) == 2


def test_a_message_resent_with_its_key_starts_one_turn_and_a_changed_body_is_refused(sdk):
    session = new_session(sdk)
    settled_turns(sdk, session.id)

    send_message(sdk, session.id, "once", "impo-run-1")
    send_message(sdk, session.id, "once", "impo-run-1")
    with pytest.raises(openai.ConflictError):
        send_message(sdk, session.id, "something else", "impo-run-1")

    assert len(settled_turns(sdk, session.id, count=2)) == 2


def test_a_message_sent_while_a_turn_is_active_steers_it_and_is_recorded(sdk, double):
    double.configure(delta_delay_ms=200, delta_chunks=5)
    session = new_session(sdk, "a slow first turn")

    send_message(sdk, session.id, "interrupting", "k-steer")

    (steering,) = double.state()["steering"]
    assert (steering["session_id"], steering["text"]) == (session.id, "interrupting")
    assert len(settled_turns(sdk, session.id)) == 1


def test_a_function_call_waits_for_its_tool_result_event(sdk, double):
    session = new_session(sdk, '/tool current_time {"zone": "UTC"}')
    remote = wait_until(
        lambda: (s := sdk.beta.agents.sessions.retrieve(session.id)).status == "requires_action" and s,
        timeout=10,
        what="the function call",
    )
    (action,) = remote.required_actions
    assert (action.type, action.name, action.arguments) == ("function_call", "current_time", {"zone": "UTC"})
    (turn,) = turns_of(sdk, session.id)
    assert turn.status == "waiting"

    result = {
        "type": "agent.session.input.tool_result",
        "turn_id": action.turn_id,
        "call_id": action.call_id,
        "success": True,
        "output": '{"now":"12:00"}',
    }
    sdk.beta.agents.sessions.events.create(session.id, events=[result], idempotency_key="result-1")
    sdk.beta.agents.sessions.events.create(session.id, events=[result], idempotency_key="result-1")
    with pytest.raises(openai.ConflictError):
        sdk.beta.agents.sessions.events.create(session.id, events=[result], idempotency_key="result-2")

    settled_turns(sdk, session.id)
    assert assistant_texts(sdk, session.id) == ['Tool current_time returned: {"now":"12:00"}']
    items = list(sdk.beta.agents.sessions.items.list(session.id, order="asc", limit=100))
    assert [item.type for item in items] == ["message", "function_call", "function_call_output", "message"]
    assert len(double.state()["input_events"]) == 1  # the resend with its key was not applied again


def test_a_cancel_event_cancels_the_active_turn(sdk):
    session = new_session(sdk, "/slow a long, slow reply to cancel")
    wait_until(lambda: turns_of(sdk, session.id)[0].status == "in_progress", timeout=10, what="the turn to run")

    sdk.beta.agents.sessions.events.create(
        session.id, events=[{"type": "agent.session.input.cancel"}], idempotency_key="cancel-1"
    )

    (turn,) = settled_turns(sdk, session.id)
    assert turn.status == "cancelled"
    items = list(sdk.beta.agents.sessions.items.list(session.id, order="asc", limit=100))
    assert [item.status for item in items if item.type == "message" and item.role == "assistant"] in (
        [],
        ["incomplete"],
    )


# --- the live stream --------------------------------------------------------------------------------


def test_the_live_stream_is_session_wide_live_only_and_every_event_parses(sdk):
    session = new_session(sdk, "before the stream")
    settled_turns(sdk, session.id)
    received = []
    stream = sdk.beta.agents.sessions.events.stream(session.id)

    reader = threading.Thread(target=read_until_idle, args=(stream, received), daemon=True)
    reader.start()
    send_message(sdk, session.id, "during the stream", "k-live")
    reader.join(timeout=20)
    stream.close()  # a reader that never saw the idle leaves it open

    types = [event.type for event in received]
    assert types[0] == "agent.session.turn.created"  # nothing from the earlier turn: no replay
    assert types[-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    deltas = [event.delta for event in received if event.type == "agent.session.turn.output_text.delta"]
    assert "".join(deltas) == "Echo: during the stream"
    assert all(isinstance(event.event_id, str) and event.event_id for event in received)


def test_the_scenarios_two_blocks_and_a_failing_turn(sdk):
    blocks = new_session(sdk, "/blocks")
    failing = new_session(sdk, "/fail out of ideas")

    settled_turns(sdk, blocks.id)
    (failed,) = settled_turns(sdk, failing.id)

    texts = assistant_texts(sdk, blocks.id)
    assert len(texts) == 2 and "你好" in texts[0] and "🎉" in texts[1]
    assert failed.status == "failed"
    assert (failed.error.code, failed.error.message) == ("internal_error", "out of ideas")


def test_faults_are_injected_per_operation(sdk, double):
    session = new_session(sdk)
    double.fault("get_session", "http_error", status=503)
    with pytest.raises(openai.InternalServerError):
        sdk.beta.agents.sessions.retrieve(session.id)
    assert sdk.beta.agents.sessions.retrieve(session.id).id == session.id

    double.fault("create_agent", "drop_response")
    with pytest.raises(openai.APIConnectionError):
        sdk.beta.agents.create(model="rebyte-echo")
    assert double.state()["counts"]["agents"] == 2  # it acted, then dropped the answer

    double.fault("list_turns", "delay", delay_ms=300)
    assert len(turns_of(sdk, session.id)) == 1  # answered late, not refused
    assert [(f["op"], f["mode"], f["hits"]) for f in double.state()["faults"]] == [("list_turns", "delay", 1)]


def test_an_outage_lasts_until_a_test_ends_it(sdk, double):
    session = new_session(sdk)
    double.fault("*", "http_error", status=503, until_ended=True)
    for _ in range(2):  # a fault until ended is not spent by the requests it refuses
        with pytest.raises(openai.InternalServerError):
            sdk.beta.agents.sessions.retrieve(session.id)

    with pytest.raises(httpx.HTTPStatusError):  # until ended, or for so long: not both
        double.fault("*", "http_error", until_ended=True, seconds=5)

    double.end_faults()
    assert double.state()["faults"] == []
    assert sdk.beta.agents.sessions.retrieve(session.id).id == session.id
