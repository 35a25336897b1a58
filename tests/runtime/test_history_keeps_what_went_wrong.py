"""A reloaded page rebuilds failures from history: the run's reason and each tool's input, output and error."""

import pytest

from runtime.models import Run, RunState
from tests.client import post_message
from tests.factories import ToolCallFactory, ToolReceiptFactory
from tools.models import ToolCallState

pytestmark = pytest.mark.django_db


def assistant_message(api) -> dict:
    return api.get("/api/v1/conversation").json()["messages"][-1]


def test_history_carries_the_reason_a_run_failed(api):
    receipt = post_message(api)
    Run.objects.filter(submission_id=receipt["submissionId"]).update(
        state=RunState.FAILED, error_code="provider_error", error_message="The provider refused the turn."
    )

    assert assistant_message(api)["error"] == {
        "code": "provider_error",
        "message": "The provider refused the turn.",
        "retryable": False,
    }


def test_history_has_no_error_for_a_run_that_did_not_fail(api):
    post_message(api)

    assert assistant_message(api)["error"] is None


def test_history_carries_a_tools_input_and_its_error_message(api):
    receipt = post_message(api)
    run = Run.objects.get(submission_id=receipt["submissionId"])
    call = ToolCallFactory(
        run=run, call_id="call-1", tool_name="save_note", arguments={"text": 5}, state=ToolCallState.FAILED
    )
    ToolReceiptFactory(
        tool_call=call, result={"error": {"code": "invalid_arguments", "message": "text: 5 is not of type 'string'"}}
    )

    [tool] = assistant_message(api)["tools"]

    assert tool == {
        "toolCallId": "call-1",
        "toolName": "save_note",
        "state": "failed",
        "errorCode": "invalid_arguments",
        "input": {"text": 5},
        "output": None,
        "errorMessage": "text: 5 is not of type 'string'",
        "approval": None,
    }


def test_history_carries_a_tools_output(api):
    receipt = post_message(api)
    run = Run.objects.get(submission_id=receipt["submissionId"])
    call = ToolCallFactory(run=run, call_id="call-2", tool_name="get_time", arguments={}, state=ToolCallState.SUCCEEDED)
    ToolReceiptFactory(tool_call=call, result={"output": {"now": "12:00"}})

    [tool] = assistant_message(api)["tools"]

    assert (tool["state"], tool["output"], tool["errorMessage"]) == ("completed", {"now": "12:00"}, None)
