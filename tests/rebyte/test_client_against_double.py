"""RebyteClient against the Rebyte double running as a real process: streaming, tools, faults, recovery.

No Django here: both sides are plain Python, and the double is reached over real sockets.
"""

import uuid

import pytest

from rebyte.client import (
    FunctionCall,
    MessageCompleted,
    RebyteAmbiguousOutcome,
    RebyteAuthError,
    RebyteClient,
    RebyteConflict,
    RebyteRetryableError,
    RebyteStreamInterrupted,
    TextDelta,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRequiresAction,
    TurnStarted,
)
from tests.processes import RebyteDouble

LOOKUP_ORDER = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def double():
    running = RebyteDouble()
    yield running
    running.stop()


@pytest.fixture
def rebyte(double):
    double.reset()
    with double.client() as client:
        yield client


def key() -> str:
    return str(uuid.uuid4())


def new_session(client: RebyteClient):
    agent = client.create_agent("Main chat", {"impo_key": key()}, key())
    return client.create_session(agent.id, {"impo_key": key()}, key())


def collect(client: RebyteClient, turn_id: str, after: int = 0) -> list:
    """All events from `after` to the terminal one, resuming across interrupted streams."""
    events = []
    while True:
        try:
            for event in client.iter_turn_events(turn_id, after):
                events.append(event)
                after = event.sequence
            return events
        except RebyteStreamInterrupted as exc:
            after = exc.last_sequence


def test_echo_turn_streams_several_deltas_that_reassemble_the_reply(rebyte):
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, "hello there", [], {"impo_run_id": key()}, key())

    events = list(rebyte.iter_turn_events(turn.id))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert isinstance(events[0], TurnStarted)
    assert len(deltas) >= 3
    assert "".join(d.delta for d in deltas) == "Echo: hello there"
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["Echo: hello there"]
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].output_text == "Echo: hello there"
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    finished = rebyte.get_turn(turn.id)
    assert (finished.status, finished.output_text) == ("completed", "Echo: hello there")
    assert [(i.type, i.role) for i in finished.items] == [("message", "user"), ("message", "assistant")]


def test_resuming_after_a_sequence_yields_only_the_later_events(rebyte):
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, "resume me", [], {}, key())
    everything = list(rebyte.iter_turn_events(turn.id))

    resumed = list(rebyte.iter_turn_events(turn.id, after=3))

    assert resumed == everything[3:]
    assert rebyte.list_turn_events(turn.id, after=3) == everything[3:]


def test_tool_turn_waits_for_the_output_and_replies_with_it(double, rebyte):
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, '/tool lookup_order {"order_id": "42"}', [LOOKUP_ORDER], {}, key())
    events = rebyte.iter_turn_events(turn.id)

    call = next(e for e in events if isinstance(e, FunctionCall))
    assert isinstance(next(events), TurnRequiresAction)
    waiting = rebyte.get_turn(turn.id)
    receipt = rebyte.submit_function_call_output(turn.id, call.call_id, '{"status": "shipped"}')
    rest = list(events)

    assert (call.name, call.parsed_arguments()) == ("lookup_order", {"order_id": "42"})
    assert waiting.status == "requires_action"
    assert [a.call_id for a in waiting.required_actions] == [call.call_id]
    assert receipt.duplicate is False
    assert rest[-1] == TurnCompleted(
        type="turn.completed",
        sequence=rest[-1].sequence,
        turn_id=turn.id,
        output_text='Tool lookup_order returned: {"status": "shipped"}',
    )
    assert [o["submissions"] for o in double.state()["function_call_outputs"]] == [1]


def test_repeating_a_function_output_is_a_duplicate_and_a_different_one_conflicts(double, rebyte):
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, "/tool lookup_order", [LOOKUP_ORDER], {}, key())
    call = next(e for e in rebyte.iter_turn_events(turn.id) if isinstance(e, FunctionCall))
    rebyte.submit_function_call_output(turn.id, call.call_id, "found")

    again = rebyte.submit_function_call_output(turn.id, call.call_id, "found")
    with pytest.raises(RebyteConflict) as conflict:
        rebyte.submit_function_call_output(turn.id, call.call_id, "something else")

    assert again.duplicate is True
    assert conflict.value.code == "output_conflict"
    assert double.state()["counts"]["function_call_outputs"] == 1
    assert collect(rebyte, turn.id)[-1].output_text == "Tool lookup_order returned: found"


def test_lost_create_session_response_is_ambiguous_and_lookup_finds_exactly_one_session(double, rebyte):
    agent = rebyte.create_agent("Main chat", {"impo_key": "user-1"}, key())
    metadata = {"impo_key": "user-1/session-1"}
    double.fault("create_session", "drop_response")

    with pytest.raises(RebyteAmbiguousOutcome):
        rebyte.create_session(agent.id, metadata, key())
    found = rebyte.find_sessions(metadata)

    assert len(found) == 1
    assert found[0].agent_id == agent.id
    assert double.state()["counts"]["sessions"] == 1
    assert double.state()["requests"]["create_session"] == 1


def test_repeating_a_create_with_its_idempotency_key_returns_the_same_session(double, rebyte):
    agent = rebyte.create_agent("Main chat", {"impo_key": "user-1"}, key())
    idempotency_key = key()
    double.fault("create_session", "drop_response")
    with pytest.raises(RebyteAmbiguousOutcome):
        rebyte.create_session(agent.id, {"impo_key": "s-1"}, idempotency_key)

    replayed = rebyte.create_session(agent.id, {"impo_key": "s-1"}, idempotency_key)

    assert [replayed] == rebyte.find_sessions({"impo_key": "s-1"})
    assert double.state()["counts"]["sessions"] == 1


def test_agents_are_found_by_metadata(rebyte):
    mine = rebyte.create_agent("Main chat", {"impo_key": "user-1", "kind": "main"}, key())
    rebyte.create_agent("Main chat", {"impo_key": "user-2", "kind": "main"}, key())

    assert rebyte.find_agents({"impo_key": "user-1", "kind": "main"}) == [mine]
    assert rebyte.get_agent(mine.id) == mine
    assert len(rebyte.find_agents({"kind": "main"})) == 2


def test_lost_create_turn_response_still_runs_and_is_found_by_run_id(double, rebyte):
    session = new_session(rebyte)
    double.fault("create_turn", "drop_response")

    with pytest.raises(RebyteAmbiguousOutcome):
        rebyte.create_turn(session.id, "are you there", [], {"impo_run_id": "run-7"}, key())
    [turn] = rebyte.find_turns(session.id, {"impo_run_id": "run-7"})

    assert collect(rebyte, turn.id)[-1].output_text == "Echo: are you there"
    assert rebyte.find_turns(session.id, {"impo_run_id": "another-run"}) == []


def test_a_single_server_error_on_a_read_is_retried_transparently(double, rebyte):
    session = new_session(rebyte)
    double.fault("get_session", "http_error", status=503, times=1)

    assert rebyte.get_session(session.id) == session
    assert double.state()["requests"]["get_session"] == 2


def test_persistent_server_errors_on_a_read_raise_a_retryable_error(double, rebyte):
    session = new_session(rebyte)
    double.fault("get_session", "http_error", status=502, times=10)

    with pytest.raises(RebyteRetryableError) as failure:
        rebyte.get_session(session.id)

    assert failure.value.status_code == 502
    assert double.state()["requests"]["get_session"] == 3  # the client's default max_attempts


def test_a_server_error_on_a_create_is_ambiguous_and_not_retried(double, rebyte):
    agent = rebyte.create_agent("Main chat", {}, key())
    double.fault("create_session", "http_error", status=500)

    with pytest.raises(RebyteAmbiguousOutcome) as failure:
        rebyte.create_session(agent.id, {"impo_key": "s-1"}, key())

    assert failure.value.status_code == 500
    assert double.state()["requests"]["create_session"] == 1
    assert rebyte.find_sessions({"impo_key": "s-1"}) == []  # this fault acted on nothing


def test_a_cut_stream_resumes_and_the_text_arrives_exactly_once(double, rebyte):
    session = new_session(rebyte)
    double.fault("turn_events", "cut_stream", after_events=2)
    turn = rebyte.create_turn(session.id, "a longer message to split", [], {}, key())

    with pytest.raises(RebyteStreamInterrupted) as cut:
        list(rebyte.iter_turn_events(turn.id))
    resumed = collect(rebyte, turn.id, after=cut.value.last_sequence)

    assert cut.value.last_sequence == 2
    assert [e.sequence for e in resumed] == list(range(3, resumed[-1].sequence + 1))
    everything = rebyte.list_turn_events(turn.id)
    assert everything[2:] == resumed
    assert "".join(e.delta for e in everything if isinstance(e, TextDelta)) == "Echo: a longer message to split"
    assert isinstance(resumed[-1], TurnCompleted)


def test_cancelling_mid_stream_ends_the_turn_cancelled(double, rebyte):
    double.configure(delta_delay_ms=300)
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, "this will be interrupted", [], {}, key())
    events = rebyte.iter_turn_events(turn.id)
    next(e for e in events if isinstance(e, TextDelta))

    cancelled = rebyte.cancel_turn(turn.id)
    rest = list(events)

    assert cancelled.status == "cancelled"
    assert isinstance(rest[-1], TurnCancelled)
    assert not any(isinstance(e, TurnCompleted | MessageCompleted) for e in rest)
    assert rebyte.cancel_turn(turn.id).status == "cancelled"
    assert rebyte.get_session(session.id).status == "idle"


def test_cancelling_a_completed_turn_leaves_it_completed(rebyte):
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, "quick", [], {}, key())
    collect(rebyte, turn.id)

    assert rebyte.cancel_turn(turn.id).status == "completed"


def test_cancelling_a_turn_waiting_for_a_tool_output_refuses_the_late_output(rebyte):
    session = new_session(rebyte)
    turn = rebyte.create_turn(session.id, "/tool lookup_order", [LOOKUP_ORDER], {}, key())
    call = next(e for e in rebyte.iter_turn_events(turn.id) if isinstance(e, FunctionCall))

    rebyte.cancel_turn(turn.id)

    with pytest.raises(RebyteConflict):
        rebyte.submit_function_call_output(turn.id, call.call_id, "too late")
    assert isinstance(collect(rebyte, turn.id)[-1], TurnCancelled)


def test_a_fail_script_and_an_undeclared_tool_end_the_turn_failed(rebyte):
    session = new_session(rebyte)
    failing = rebyte.create_turn(session.id, "/fail the model broke", [], {}, key())
    undeclared = rebyte.create_turn(session.id, "/tool rm_rf", [LOOKUP_ORDER], {}, key())

    assert collect(rebyte, failing.id)[-1].error.message == "the model broke"
    last = collect(rebyte, undeclared.id)[-1]
    assert isinstance(last, TurnFailed)
    assert last.error.code == "unknown_tool"
    assert rebyte.get_turn(undeclared.id).error == last.error


def test_a_missing_api_key_is_an_auth_error(double):
    with double.client(api_key="") as anonymous, pytest.raises(RebyteAuthError) as failure:
        anonymous.find_agents({})

    assert failure.value.status_code == 401


def test_the_state_file_keeps_resources_across_restarts_and_fails_interrupted_turns(tmp_path):
    state_file = tmp_path / "state.json"
    first = RebyteDouble("--state-file", str(state_file))
    try:
        with first.client() as client:
            session = new_session(client)
            waiting = client.create_turn(session.id, "/tool lookup_order", [LOOKUP_ORDER], {}, key())
            next(e for e in client.iter_turn_events(waiting.id) if isinstance(e, TurnRequiresAction))
    finally:
        first.stop()

    second = RebyteDouble("--state-file", str(state_file))
    try:
        with second.client() as client:
            assert client.find_sessions(session.metadata) == [client.get_session(session.id)]
            interrupted = client.get_turn(waiting.id)
            assert (interrupted.status, interrupted.error.code) == ("failed", "double_restarted")
    finally:
        second.stop()
