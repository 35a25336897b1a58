"""Tool approval with real worker, sweeper and web processes, the double's `/tool` script making the calls.

save_note is made to need approval (the operator setting) so a call's single execution can be counted in
the notes table; play_sound needs it by default.
"""

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from devtools.stack import start_web, wait_until
from runtime.models import Event, EventType, RunState
from tests.client import finished_run, post_message, run_of, send_message, token_of
from tests.concurrency import all_at_once
from tests.devices import device_answers, register_device
from tools.models import ApprovalOutcome, ApprovalStatus, Note, ToolApproval, ToolCall, ToolCallState

JS_DIR = Path(__file__).resolve().parent.parent / "js"
SAVE_MILK = '/tool save_note {"text": "buy milk"}'


@pytest.fixture
def approval_stack(stack):
    stack.env["IMPO_TOOL_APPROVAL"] = "save_note=always"
    # As in production: a wake-up can miss its run (a claim skips a row another transaction locks, such as a
    # second answer or a device's report), and the sweeper sends another.
    stack.start_sweeper()
    return stack


def parked(submission_id) -> ToolCall:
    """The run's call once the run is parked for its approval."""
    wait_until(
        lambda: run_of(submission_id).state == RunState.WAITING_APPROVAL,
        timeout=60,
        what="the run to wait for approval",
    )
    return ToolCall.objects.get(run__submission_id=submission_id)


def answer(api, call, decision="approve", *, client_decision_id="d-1", **fields):
    body = {"decision": decision, "clientDecisionId": client_decision_id, **fields}
    return api.post(f"/api/v1/tool-calls/{call.id}/approval", body, format="json")


def tool_results_sent(rebyte_double) -> list[dict]:
    return [r["body"]["events"][0] for r in rebyte_double.requests() if r["op"] == "input_tool_result"]


def test_an_approval_survives_a_worker_sigkill_and_the_tool_runs_once(approval_stack, api, rebyte_double):
    doomed = approval_stack.start_worker("doomed")
    submission_id = post_message(api, SAVE_MILK)["submissionId"]
    call = parked(submission_id)
    assert run_of(submission_id).lease_owner == ""
    assert not Note.objects.exists()

    doomed.kill()
    approval_stack.start_worker("successor")
    response = answer(api, call)

    assert response.status_code == 200, response.json()
    run = finished_run(submission_id)
    assert run.state == RunState.COMPLETED
    note = Note.objects.get()
    assert note.text == "buy milk"
    call.refresh_from_db()
    assert (call.state, call.attempts) == (ToolCallState.SUCCEEDED, 1)
    assert run.submission.assistant_message.text == f'Tool save_note returned: {{"noteId":"{note.id}"}}'
    [result] = tool_results_sent(rebyte_double)
    assert result["success"] is True


def test_a_denial_reaches_the_agent_as_a_tool_error(approval_stack, api, rebyte_double):
    approval_stack.start_worker()
    submission_id = post_message(api, SAVE_MILK)["submissionId"]
    call = parked(submission_id)

    answer(api, call, "deny", reason="I have milk")

    run = finished_run(submission_id)
    assert run.state == RunState.COMPLETED
    assert not Note.objects.exists()
    [result] = tool_results_sent(rebyte_double)
    assert (result["call_id"], result["success"]) == (call.call_id, False)
    assert result["error"] == "approval_denied: The user denied this call: I have milk"
    assert run.submission.assistant_message.text == f"Tool save_note failed: {result['error']}"


def test_an_edited_call_runs_with_the_owners_arguments(approval_stack, api):
    approval_stack.start_worker()
    submission_id = post_message(api, SAVE_MILK)["submissionId"]
    call = parked(submission_id)

    answer(api, call, arguments={"text": "buy oat milk"})

    assert finished_run(submission_id).state == RunState.COMPLETED
    assert Note.objects.get().text == "buy oat milk"


def test_an_unanswered_call_is_denied_at_its_deadline_with_no_client_connected(approval_stack, api, rebyte_double):
    approval_stack.env["IMPO_TOOL_APPROVAL_TIMEOUT_SECONDS"] = "2"  # set by the worker that asks
    approval_stack.start_worker()

    run = finished_run(post_message(api, SAVE_MILK)["submissionId"])

    assert run.state == RunState.COMPLETED
    approval = ToolApproval.objects.select_related("tool_call").get()
    assert (approval.status, approval.outcome) == (ApprovalStatus.DENIED, ApprovalOutcome.TIMED_OUT)
    assert approval.tool_call.error_code == "approval_timeout"
    [result] = tool_results_sent(rebyte_double)
    assert result["error"].startswith("approval_timeout: No one approved this call within 2 seconds")
    assert not Note.objects.exists()


def test_cancelling_a_run_waiting_for_approval_ends_the_run_and_the_approval(approval_stack, api, rebyte_double):
    approval_stack.start_worker()
    submission_id = post_message(api, SAVE_MILK)["submissionId"]
    call = parked(submission_id)

    response = api.post(f"/api/v1/submissions/{submission_id}/cancel", {}, format="json")

    assert response.status_code == 200
    approval = ToolApproval.objects.get(tool_call=call)
    assert (approval.status, approval.outcome) == (ApprovalStatus.DENIED, ApprovalOutcome.CANCELLED)
    run = finished_run(submission_id)
    assert run.state == RunState.CANCELLED
    [session] = rebyte_double.state()["sessions"]
    [turn] = session["turns"]
    assert turn["status"] == "cancelled"
    assert tool_results_sent(rebyte_double) == []  # a cancelled turn gets no more input
    assert not Note.objects.exists()
    types = list(Event.objects.filter(submission_id=submission_id).order_by("seq").values_list("type", flat=True))
    assert types.index(EventType.TOOL_APPROVAL_DECIDED) < types.index(EventType.RUN_CANCELLED)


def test_two_devices_answering_at_once_get_one_decision(approval_stack, api, user):
    _, base_url = start_web(approval_stack)
    approval_stack.start_worker()
    submission_id = post_message(api, SAVE_MILK)["submissionId"]
    call = parked(submission_id)
    token = token_of(user)
    devices = [("phone", "approve"), ("laptop", "deny")]

    def decide(index: int) -> httpx.Response:
        name, decision = devices[index]
        with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            return client.post(
                f"/api/v1/tool-calls/{call.id}/approval", json={"decision": decision, "clientDecisionId": name}
            )

    responses = dict(zip([name for name, _ in devices], all_at_once(len(devices), decide), strict=True))
    statuses = sorted(response.status_code for response in responses.values())
    assert statuses == [200, 409]
    [winner] = [name for name, response in responses.items() if response.status_code == 200]
    [loser] = [response for response in responses.values() if response.status_code == 409]
    assert loser.json()["error"]["code"] == "approval_conflict"
    approval = ToolApproval.objects.get(tool_call=call)
    assert approval.client_decision_id == winner
    assert Event.objects.filter(type=EventType.TOOL_APPROVAL_DECIDED).count() == 1
    run = finished_run(submission_id)
    assert run.state == RunState.COMPLETED
    assert Note.objects.count() == (1 if winner == "phone" else 0)


def test_an_approved_device_call_runs_on_the_device(stack, api):
    stack.env["IMPO_TOOL_APPROVAL"] = ""  # the default: play_sound needs approval
    stack.start_worker()
    stack.start_sweeper()
    device_id = register_device(api)
    response = send_message(api, '/tool play_sound {"sound": "chime"}', client_message_id="m-1", deviceId=device_id)
    submission_id = response.json()["submissionId"]
    call = parked(submission_id)
    assert api.get(f"/api/v1/devices/{device_id}/tool-invocations").json()["invocations"] == []

    answer(api, call)

    [invocation] = api.get(f"/api/v1/devices/{device_id}/tool-invocations").json()["invocations"]
    device_answers(api, device_id, invocation["invocationId"], "played")
    run = finished_run(submission_id)
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == 'Tool play_sound returned: "played"'


def read_with_the_ai_sdk(url: str, token: str) -> dict:
    result = subprocess.run(
        ["node", "read_ui_message_stream.mjs", url, token], cwd=JS_DIR, capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("decision, state", [("approve", "output-available"), ("deny", "output-denied")])
def test_the_ai_sdk_reads_the_approval_request_and_its_outcome(approval_stack, api, user, decision, state):
    _, base_url = start_web(approval_stack)
    approval_stack.start_worker()
    submission_id = post_message(api, SAVE_MILK)["submissionId"]
    call = parked(submission_id)
    token = token_of(user)
    url = f"{base_url}/api/v1/submissions/{submission_id}/stream"
    pending = approval_request_chunk(url, token)
    assert pending == {"type": "tool-approval-request", "approvalId": str(call.id), "toolCallId": call.call_id}

    answer(api, call, decision)
    read = read_with_the_ai_sdk(url, token)

    assert (read["finished"], read["errors"]) == (True, [])
    [tool] = [part for part in read["message"]["parts"] if part["type"] == "tool-save_note"]
    assert (tool["toolCallId"], tool["state"], tool["approval"]["id"]) == (call.call_id, state, str(call.id))
    assert tool["input"] == {"text": "buy milk"}


def approval_request_chunk(url: str, token: str) -> dict:
    """The stream's `tool-approval-request` chunk, read raw while the run waits (the stream stays open)."""
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line.removeprefix("data: "))
                if chunk["type"] == "tool-approval-request":
                    return chunk
    raise AssertionError("the stream ended without a tool-approval-request")
