"""The projection of persisted events onto UI message stream chunks, fed events as the stream reads them."""

from runtime.models import EventType
from runtime.realtime.ai_sdk_stream import UIMessageStream, compact


def fed(*events) -> list[dict]:
    stream = UIMessageStream(message_id="msg-1", submission_id="sub-1")
    chunks = stream.start()
    for kind, payload in events:
        chunks += stream.feed({"type": kind, "payload": payload})
    return chunks


def steps(chunks) -> list[tuple]:
    return [(c["id"], c["data"]["kind"], c["data"]["status"]) for c in chunks if c["type"] == "data-instant-step"]


STARTED = (EventType.RUN_STARTED, {"status": "running"})


def test_a_started_run_is_a_running_step_until_its_first_text():
    chunks = fed(STARTED, (EventType.TEXT_DELTA, {"partId": "p1", "delta": "Hi"}))

    assert steps(chunks) == [("step-run-sub-1", "run", "running"), ("step-run-sub-1", "run", "completed")]
    assert [c["type"] for c in chunks][-2:] == ["text-start", "text-delta"]


def test_a_device_call_is_a_waiting_step_then_a_running_one_once_claimed():
    requested = {
        "toolCallId": "c1",
        "toolName": "play_sound",
        "input": {},
        "device": {"invocationId": "i1", "deviceId": "d1", "expiresAt": "2026-01-01T00:00:00+00:00"},
    }
    chunks = fed(
        STARTED,
        (EventType.TOOL_REQUESTED, requested),
        (EventType.TOOL_ACCEPTED, {"toolCallId": "c1", "toolName": "play_sound", "status": "waiting_device"}),
        (EventType.TOOL_UNCERTAIN, {"toolCallId": "c1", "toolName": "play_sound", "code": "device_timeout"}),
    )

    assert steps(chunks)[2:] == [
        ("step-tool-c1", "device", "running"),
        ("step-tool-c1", "device", "running"),
        ("step-tool-c1", "device", "uncertain"),
    ]


def test_a_call_refused_on_the_spot_settles_no_step_it_never_opened():
    chunks = fed(
        (
            EventType.TOOL_COMPLETED,
            {"toolCallId": "c9", "toolName": "x", "error": {"code": "unknown_tool", "message": "no"}},
        )
    )

    assert steps(chunks) == []


def test_a_reconstruction_keeps_only_each_steps_latest_state():
    chunks = fed(
        STARTED,
        (EventType.TOOL_REQUESTED, {"toolCallId": "c1", "toolName": "current_time", "input": {}}),
        (EventType.TOOL_COMPLETED, {"toolCallId": "c1", "toolName": "current_time", "output": {"now": "x"}}),
    )

    assert steps(compact(chunks)) == [("step-run-sub-1", "run", "completed"), ("step-tool-c1", "tool", "completed")]


def test_a_failed_run_ends_with_error_then_its_status_then_finish():
    chunks = fed(STARTED, (EventType.RUN_FAILED, {"error": {"code": "x", "message": "broke"}}))

    assert [c["type"] for c in chunks][-3:] == ["error", "data-instant-submission", "finish"]
    assert chunks[-2]["data"]["status"] == "failed"


def test_a_cancelled_run_ends_with_abort_then_its_status_then_finish():
    chunks = fed(STARTED, (EventType.RUN_CANCELLED, {}))

    assert [c["type"] for c in chunks][-3:] == ["abort", "data-instant-submission", "finish"]
    assert chunks[-2]["data"]["status"] == "cancelled"


REQUESTED = (EventType.TOOL_REQUESTED, {"toolCallId": "c1", "toolName": "save_note", "input": {"text": "a"}})
APPROVAL_REQUESTED = (
    EventType.TOOL_APPROVAL_REQUESTED,
    {
        "toolCallId": "c1",
        "toolName": "save_note",
        "approvalId": "a1",
        "input": {"text": "a"},
        "expiresAt": "2026-01-01T00:00:00+00:00",
    },
)


def decided(decision: str, outcome: str, **extra) -> tuple:
    payload = {"toolCallId": "c1", "toolName": "save_note", "approvalId": "a1", "decision": decision}
    return (EventType.TOOL_APPROVAL_DECIDED, {**payload, "outcome": outcome, "reason": "", **extra})


def test_a_call_awaiting_approval_is_an_approval_request_part_and_a_waiting_step():
    chunks = fed(STARTED, REQUESTED, APPROVAL_REQUESTED)

    assert {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"} in chunks
    assert chunks[-1]["data"]["status"] == "waiting_approval"
    assert steps(chunks)[-1] == ("step-tool-c1", "approval", "running")


def test_a_denied_call_is_told_as_denied_once_and_not_as_a_tool_error():
    denial = {"toolCallId": "c1", "toolName": "save_note", "error": {"code": "approval_denied", "message": "no"}}

    chunks = fed(
        STARTED, REQUESTED, APPROVAL_REQUESTED, decided("denied", "approval_denied"), (EventType.TOOL_COMPLETED, denial)
    )

    assert [c for c in chunks if c["type"].startswith("tool-output")] == [
        {"type": "tool-output-denied", "toolCallId": "c1"}
    ]
    assert steps(chunks)[-1] == ("step-tool-c1", "approval", "failed")


def test_an_edited_approval_shows_the_arguments_the_call_runs_with():
    chunks = fed(STARTED, REQUESTED, APPROVAL_REQUESTED, decided("approved", "edited", input={"text": "b"}))

    inputs = [c["input"] for c in chunks if c["type"] == "tool-input-available"]
    assert inputs == [{"text": "a"}, {"text": "b"}]
    assert steps(chunks)[-1] == ("step-tool-c1", "tool", "running")


def test_an_approved_device_call_sends_its_device_request_then():
    device = {"invocationId": "i1", "deviceId": "d1", "expiresAt": "2026-01-01T00:00:00+00:00"}

    chunks = fed(
        STARTED, REQUESTED, APPROVAL_REQUESTED, decided("approved", "approved", input={"text": "a"}, device=device)
    )

    [request] = [c for c in chunks if c["type"] == "data-instant-device-request"]
    assert request["data"] == {"schemaVersion": 1, "toolCallId": "c1", **device}
    assert steps(chunks)[-1] == ("step-tool-c1", "device", "running")


def text_chunks(chunks) -> list[tuple]:
    return [(c["type"], c.get("delta")) for c in chunks if c["type"].startswith("text-")]


def test_a_completed_part_whose_deltas_were_compacted_is_sent_whole():
    chunks = fed(STARTED, (EventType.MESSAGE_COMPLETED, {"partId": "p1", "text": "Hello there"}))

    assert text_chunks(chunks) == [("text-start", None), ("text-delta", "Hello there"), ("text-end", None)]
    assert steps(chunks)[-1] == ("step-run-sub-1", "run", "completed")


def test_a_part_whose_later_deltas_went_while_it_was_followed_gets_the_rest_at_its_completion():
    chunks = fed(
        STARTED,
        (EventType.TEXT_DELTA, {"partId": "p1", "delta": "Hello"}),
        (EventType.MESSAGE_COMPLETED, {"partId": "p1", "text": "Hello there"}),
    )

    assert "".join(delta for kind, delta in text_chunks(chunks) if kind == "text-delta") == "Hello there"
    assert text_chunks(chunks)[-1] == ("text-end", None)


def test_a_part_completed_with_its_deltas_sends_no_text_twice():
    chunks = fed(
        STARTED,
        (EventType.TEXT_DELTA, {"partId": "p1", "delta": "Hello"}),
        (EventType.TEXT_DELTA, {"partId": "p1", "delta": " there"}),
        (EventType.MESSAGE_COMPLETED, {"partId": "p1", "text": "Hello there"}),
    )

    assert text_chunks(chunks) == [
        ("text-start", None),
        ("text-delta", "Hello"),
        ("text-delta", " there"),
        ("text-end", None),
    ]


def thinking(delta, *, text=None, step="thinking-rs1-0"):
    payload = {"messageId": "msg-1", "stepId": step, "kind": "thinking", "status": "running", "delta": delta}
    if text is not None:
        payload.update(status="completed", text=text)
    return (EventType.RUN_PROGRESS, payload)


def reasoning(chunks) -> list[tuple]:
    return [(c["type"], c.get("delta")) for c in chunks if c["type"].startswith("reasoning-")]


def test_progress_is_a_reasoning_part_that_ends_the_run_step_and_comes_before_the_text():
    chunks = fed(
        STARTED,
        thinking("**Plan**"),
        thinking(" it", text="**Plan** it"),
        (EventType.TEXT_DELTA, {"partId": "p1", "delta": "Hi"}),
    )

    assert reasoning(chunks) == [
        ("reasoning-start", None),
        ("reasoning-delta", "**Plan**"),
        ("reasoning-delta", " it"),
        ("reasoning-end", None),
    ]
    assert steps(chunks) == [("step-run-sub-1", "run", "running"), ("step-run-sub-1", "run", "completed")]
    kinds = [c["type"] for c in chunks]
    assert kinds.index("reasoning-end") < kinds.index("text-start")


def test_a_step_seen_only_at_its_end_is_told_whole_and_a_late_repeat_adds_nothing():
    chunks = fed(thinking("", text="**Whole** thought"), thinking("", text="**Whole** thought"))

    assert reasoning(chunks) == [
        ("reasoning-start", None),
        ("reasoning-delta", "**Whole** thought"),
        ("reasoning-end", None),
    ]


def test_a_run_that_ends_while_it_reasons_closes_its_reasoning_before_it_finishes():
    chunks = fed(thinking("half a"), (EventType.RUN_CANCELLED, {"status": "cancelled"}))

    assert [c["type"] for c in chunks][-5:] == [
        "reasoning-delta",
        "reasoning-end",
        "abort",
        "data-instant-submission",
        "finish",
    ]


def test_a_reconstruction_sends_each_steps_reasoning_at_once():
    chunks = compact(fed(thinking("a"), thinking("b"), thinking("c", step="thinking-rs2-0")))

    assert [(c["type"], c.get("id"), c.get("delta")) for c in chunks if c["type"].startswith("reasoning-")] == [
        ("reasoning-start", "thinking-rs1-0", None),
        ("reasoning-delta", "thinking-rs1-0", "ab"),
        ("reasoning-start", "thinking-rs2-0", None),
        ("reasoning-delta", "thinking-rs2-0", "c"),
    ]


def test_a_later_parts_blank_line_stays_in_the_message_text_not_in_its_own_text_part():
    chunks = fed(
        (EventType.TEXT_DELTA, {"partId": "p1", "delta": "First."}),
        (EventType.TEXT_DELTA, {"partId": "p2", "delta": "\n\nSecond"}),
        (EventType.MESSAGE_COMPLETED, {"partId": "p2", "text": "Second."}),
    )

    texts = [(c["id"], c["delta"]) for c in chunks if c["type"] == "text-delta"]
    assert texts == [("p1", "First."), ("p2", "Second"), ("p2", ".")]
