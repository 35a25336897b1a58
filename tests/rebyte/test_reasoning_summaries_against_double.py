"""The double's reasoning summaries, read through the `openai` SDK with strict response validation: the events of
`agent.session.turn.reasoning_summary_*` as its types define them, around a `reasoning` item that the items list
keeps; sent only when the knob is on and the session's agent asked for summaries."""

import threading
import uuid

import httpx
import pytest
from openai.types.beta import AgentReasoningItem

from devtools.stack import wait_until
from rebyte.client import RebyteGateway, user_input
from tests.rebyte.double_sessions import read_until_idle

BETA = {"OpenAI-Beta": "agents=v1", "Authorization": "Bearer test-key"}
SUMMARY_EVENTS = (
    "agent.session.turn.reasoning_summary_part.added",
    "agent.session.turn.reasoning_summary_text.delta",
    "agent.session.turn.reasoning_summary_text.done",
    "agent.session.turn.reasoning_summary_part.done",
)


def session_with_a_turn_followed(sdk, text: str, reasoning: dict | None) -> tuple[str, list]:
    """A session whose second turn is read from its live stream (opened before the message, as the real service
    requires); returns the session id and that turn's events."""
    agent = sdk.beta.agents.create(model="rebyte-echo", name="reasoning", metadata={"k": uuid.uuid4().hex})
    override = {"tools": [], **({"reasoning": reasoning} if reasoning is not None else {})}
    session = sdk.beta.agents.sessions.create(
        environment={"type": "none"}, agent_id=agent.id, agent=override, input=user_input(["first"]), metadata={}
    )
    wait_until(
        lambda: sdk.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=20, what="the first turn"
    )
    received = []
    stream = sdk.beta.agents.sessions.events.stream(session.id)

    reader = threading.Thread(target=read_until_idle, args=(stream, received), daemon=True)
    reader.start()
    sdk.beta.agents.sessions.events.create(
        session.id,
        events=[{"type": "agent.session.input.message", "input": user_input([text])}],
        idempotency_key=f"k-{uuid.uuid4().hex}",
    )
    reader.join(timeout=20)
    stream.close()  # a reader that never saw the idle leaves it open
    return session.id, received


def test_a_turn_reasons_first_with_summary_events_the_sdk_parses(sdk, rebyte_double):
    rebyte_double.configure(reasoning_summaries=True)

    session_id, events = session_with_a_turn_followed(sdk, "think about it", {"summary": "auto"})

    summary = [event for event in events if event.type in SUMMARY_EVENTS]
    kinds = [event.type for event in summary]
    assert kinds[0] == SUMMARY_EVENTS[0] and kinds[-2:] == list(SUMMARY_EVENTS[2:])
    assert set(kinds[1:-2]) == {"agent.session.turn.reasoning_summary_text.delta"}
    item_id = summary[0].item_id
    assert {(event.item_id, event.summary_index) for event in summary} == {(item_id, 0)}
    written = "".join(event.delta for event in summary if event.type.endswith("text.delta"))
    assert written == summary[-2].text == summary[-1].part.text
    assert written.startswith("**Reading the message**") and "think about it" in written
    # Its item opens before its summary and ends after it; the reply's text comes only then.
    added = next(e for e in events if e.type == "agent.session.turn.item.added" and e.item.type == "reasoning")
    done = next(e for e in events if e.type == "agent.session.turn.item.done" and e.item.type == "reasoning")
    order = [event.event_id for event in events]
    first_text = next(e for e in events if e.type == "agent.session.turn.output_text.delta")
    assert order.index(added.event_id) < order.index(summary[0].event_id)
    assert order.index(summary[-1].event_id) < order.index(done.event_id) < order.index(first_text.event_id)
    assert added.item.id == done.item.id == item_id and done.item.summary[0].text == written
    # The items list keeps the reasoning item, and the reply is the echo as ever.
    items = list(sdk.beta.agents.sessions.items.list(session_id, order="asc", limit=100))
    # One per turn: the session's first turn reasoned too.
    assert [item.type for item in items].count("reasoning") == 2
    [reasoning] = [item for item in items if item.id == item_id]
    assert isinstance(reasoning, AgentReasoningItem)
    assert (reasoning.id, reasoning.status, reasoning.summary[0].text) == (item_id, "completed", written)
    replies = [item.output_text for item in items if item.type == "message" and item.role == "assistant"]
    assert replies[-1] == "Echo: think about it"


def test_an_agent_that_asked_for_no_summaries_gets_none(sdk, rebyte_double):
    rebyte_double.configure(reasoning_summaries=True)

    _, events = session_with_a_turn_followed(sdk, "quiet thoughts", None)

    assert not [event for event in events if event.type in SUMMARY_EVENTS]
    assert not [e for e in events if e.type == "agent.session.turn.item.added" and e.item.type == "reasoning"]


def test_summaries_asked_for_come_only_with_the_knob_on(sdk, rebyte_double):
    _, events = session_with_a_turn_followed(sdk, "no knob", {"summary": "concise"})

    assert not [event for event in events if event.type in SUMMARY_EVENTS]


def test_the_agent_reports_its_reasoning_configuration_and_refuses_an_unknown_summary(sdk, rebyte_double):
    agent = sdk.beta.agents.create(model="rebyte-echo", reasoning={"effort": "low", "summary": "detailed"})
    assert (agent.reasoning.effort, agent.reasoning.summary) == ("low", "detailed")
    assert sdk.beta.agents.create(model="rebyte-echo").reasoning.summary is None

    with httpx.Client(base_url=rebyte_double.api_url, headers=BETA, timeout=5) as raw:
        refused = raw.post("/agents", json={"model": "rebyte-echo", "reasoning": {"summary": "verbose"}})
        knob = raw.post(rebyte_double.api_url.removesuffix("/v1") + "/_double/config", json={"reasoning_summaries": 1})

    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_value"
    assert knob.status_code == 400


def test_the_gateway_asks_its_sessions_for_the_summaries_it_was_given_and_refuses_another_kind(rebyte_double):
    with rebyte_double.gateway(reasoning_summary="concise") as asking, rebyte_double.gateway() as silent:
        agent = asking.create_agent(model="rebyte-echo", name="a", instructions="i", metadata={"k": uuid.uuid4().hex})
        summaries = [
            gateway.create_session(agent_id=agent.id, tools=[], input_parts=["hi"], metadata={}).agent.reasoning.summary
            for gateway in (asking, silent)
        ]

    assert summaries == ["concise", None]
    with pytest.raises(ValueError):
        RebyteGateway(rebyte_double.api_url, "k", timeout=1, stream_timeout=1, reasoning_summary="loud")
