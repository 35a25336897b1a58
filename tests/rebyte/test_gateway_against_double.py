"""Our adapter, `RebyteGateway`, against the double over real sockets: provider failures sorted into refused,
unavailable and unknown outcome, a quiet live stream ended on interrupt, and the wire format of the public sources.
"""

import threading
import time

import pytest

from devtools.stack import wait_until
from rebyte.failures import Refused, Unavailable, UnknownOutcome
from tests.rebyte.double_sessions import CURRENT_TIME

# --- the adapter: errors sorted into refused / unavailable / unknown outcome -------------------------


def test_the_adapter_sorts_provider_failures(rebyte_double):
    with rebyte_double.gateway(max_retries=0) as gateway:
        with pytest.raises(Refused) as refused:
            gateway.get_session("sess_000000000000000000000000")
        assert refused.value.status == 404

        rebyte_double.fault("list_agents", "http_error", status=503)
        with pytest.raises(Unavailable):
            gateway.list_agents()

        rebyte_double.fault("create_agent", "drop_response")
        with pytest.raises(UnknownOutcome):
            gateway.create_agent(model="rebyte-echo", name="n", instructions="i", metadata={})

        rebyte_double.fault("create_agent", "http_error", status=502)
        with pytest.raises(UnknownOutcome):
            gateway.create_agent(model="rebyte-echo", name="n", instructions="i", metadata={})


def test_an_interrupted_quiet_live_stream_ends_at_once_without_a_failure_and_closes_upstream(rebyte_double):
    failures = []
    with rebyte_double.gateway(on_failure=failures.append) as gateway:
        agent = gateway.create_agent(model="rebyte-echo", name="n", instructions="i", metadata={})
        session = gateway.create_session(agent_id=agent.id, tools=[], input_parts=["hi"], metadata={})
        wait_until(lambda: gateway.list_turns(session.id)[0].status == "completed", timeout=10, what="first turn")
        read, ended = [], threading.Event()

        def reader(events):
            read.extend(events)
            ended.set()

        with gateway.live_events(session.id) as events:
            thread = threading.Thread(target=reader, args=(events,), daemon=True)
            thread.start()
            wait_until(lambda: rebyte_double.state()["live_streams"] == {session.id: 1}, timeout=10, what="the stream")
            time.sleep(0.3)  # the reader is waiting on a quiet stream
            events.interrupt()
            assert ended.wait(5), "an interrupted reader still waits for the next event"
        assert read == [] and failures == []
        wait_until(
            lambda: rebyte_double.state()["live_streams"] == {}, timeout=10, what="the double to see the stream closed"
        )
        # The gateway's pool still serves calls afterwards.
        assert gateway.list_turns(session.id)[0].status == "completed"


# --- the wire, as the original server's gateway tests show it ---------------------------------------


def test_the_adapter_speaks_the_wire_format_of_the_public_sources(rebyte_double):
    with rebyte_double.gateway() as gateway:
        agent = gateway.create_agent(model="rebyte-echo", name="Impo", instructions="be kind", metadata={"a": "1"})
        session = gateway.create_session(
            agent_id=agent.id, tools=[CURRENT_TIME], input_parts=["context", "你好"], metadata={"impo_intent": "i-1"}
        )
        wait_until(lambda: gateway.list_turns(session.id)[0].status == "completed", timeout=10, what="first turn")
        with gateway.live_events(session.id):
            gateway.send_message(session.id, ["接着说"], idempotency_key="impo-run-2")
            wait_until(
                lambda: [t.status for t in gateway.list_turns(session.id)] == ["completed", "completed"],
                timeout=10,
                what="second turn",
            )
        gateway.send_cancel(session.id, idempotency_key="impo-cancel-2")
        gateway.list_sessions(agent.id)
        gateway.list_items(session.id)

    requests = rebyte_double.requests()
    assert all(r["headers"].get("OpenAI-Beta") == "agents=v1" and r["authorized"] for r in requests)
    by_op = {r["op"]: r for r in requests}
    assert by_op["create_agent"]["path"] == "/v1/agents"
    assert by_op["create_agent"]["body"] == {
        "model": "rebyte-echo",
        "name": "Impo",
        "instructions": "be kind",
        "metadata": {"a": "1"},
    }
    create_session = by_op["create_session"]
    assert create_session["path"] == "/v1/agents/sessions"
    assert "Idempotency-Key" not in create_session["headers"]
    assert create_session["body"] == {
        "environment": {"type": "none"},
        "agent_id": agent.id,
        "agent": {"tools": [CURRENT_TIME]},
        "input": [
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "context"}, {"type": "input_text", "text": "你好"}],
            }
        ],
        "metadata": {"impo_intent": "i-1"},
    }
    message, cancel = by_op["input_message"], by_op["input_cancel"]
    assert message["path"] == cancel["path"] == f"/v1/agents/sessions/{session.id}/events"
    assert message["headers"]["Idempotency-Key"] == "impo-run-2"
    assert message["body"] == {
        "events": [
            {
                "type": "agent.session.input.message",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "接着说"}]}],
            }
        ]
    }
    assert cancel["headers"]["Idempotency-Key"] == "impo-cancel-2"
    assert cancel["body"] == {"events": [{"type": "agent.session.input.cancel"}]}
    assert by_op["session_events"]["headers"]["Accept"] == "text/event-stream"
    assert by_op["session_events"]["query"] == {"include_obfuscation": "false"}  # no padding to parse
    assert by_op["list_sessions"]["query"] == {"agent_id": agent.id, "order": "desc", "limit": "100"}
    assert by_op["list_items"]["query"] == {"order": "asc", "limit": "100"}


def test_tool_results_carry_the_sdk_success_and_error_envelope(rebyte_double):
    with rebyte_double.gateway() as gateway:
        agent = gateway.create_agent(model="rebyte-echo", name="Impo", instructions="", metadata={})
        session = gateway.create_session(
            agent_id=agent.id, tools=[CURRENT_TIME], input_parts=["/tool current_time\n/tool current_time"], metadata={}
        )
        remote = wait_until(
            lambda: (s := gateway.get_session(session.id)).status == "requires_action" and s,
            timeout=10,
            what="two calls",
        )
        first, second = remote.required_actions
        gateway.send_tool_result(
            session.id,
            turn_id=first.turn_id,
            call_id=first.call_id,
            success=True,
            text='{"t":1}',
            idempotency_key="r-1",
        )
        gateway.send_tool_result(
            session.id,
            turn_id=second.turn_id,
            call_id=second.call_id,
            success=False,
            text="device_timeout: no answer",
            idempotency_key="r-2",
        )
        wait_until(lambda: gateway.list_turns(session.id)[0].status == "completed", timeout=10, what="the turn")
        texts = [i.output_text for i in gateway.list_items(session.id) if i.type == "message" and i.role == "assistant"]

    results = [r for r in rebyte_double.requests() if r["op"] == "input_tool_result"]
    assert [r["headers"]["Idempotency-Key"] for r in results] == ["r-1", "r-2"]
    assert results[0]["body"]["events"][0] == {
        "type": "agent.session.input.tool_result",
        "turn_id": first.turn_id,
        "call_id": first.call_id,
        "success": True,
        "output": '{"t":1}',
    }
    assert "output" not in results[1]["body"]["events"][0]
    assert results[1]["body"]["events"][0]["error"] == "device_timeout: no answer"
    assert texts == ['Tool current_time returned: {"t":1}\nTool current_time failed: device_timeout: no answer']
