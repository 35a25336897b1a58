"""Tool calls driven by the double's `/tool` script, executed by real worker processes.

The dangerous moment for every side-effect class is a worker dying after it dispatched a call and
before the provider acknowledged the result; each class is killed there.
"""

import json
from contextlib import contextmanager

import psycopg
import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection

from core.errors import Conflict
from devtools.stack import wait_until
from runtime.models import Event, EventType, Run, RunState, Submission, Task
from runtime.services import devices
from tests.client import event_types, post_message, run_of, settled_run
from tests.devices import claim, device_answers, register_device, report
from tools.models import DeviceInvocation, InvocationStatus, Note, ToolCall, ToolCallState, ToolReceipt

DEVICE_TIMEOUT_SECONDS = 4
PLAY_CHIME = '/tool play_sound {"sound": "chime"}'


def reply(run: Run) -> str:
    return run.submission.assistant_message.text


def tool_reply(name: str, result: dict) -> str:
    """What the echo agent says back: the output as canonical JSON, or the error as `code: message`."""
    if "error" in result:
        return f"Tool {name} failed: {result['error']['code']}: {result['error']['message']}"
    return f"Tool {name} returned: {json.dumps(result['output'], sort_keys=True, separators=(',', ':'))}"


@contextmanager
def notes_table_locked():
    """Holds the notes table from another session, so a tool touching it blocks mid-call."""
    settings_dict = connection.settings_dict
    with psycopg.connect(
        dbname=settings_dict["NAME"], host=settings_dict["HOST"], port=settings_dict["PORT"], user=settings_dict["USER"]
    ) as blocker:
        blocker.execute("LOCK TABLE tools_note IN ACCESS EXCLUSIVE MODE")
        yield
        blocker.rollback()


def kill_worker_between_receipt_and_ack(stack, api, rebyte_double, text: str) -> str:
    """SIGKILLs the worker after the call's receipt committed and before the provider acknowledged it."""
    rebyte_double.fault("input_tool_result", "delay", delay_ms=8000)
    doomed = stack.start_worker("doomed")
    stack.start_sweeper()
    submission_id = post_message(api, text)["submissionId"]
    wait_until(lambda: ToolReceipt.objects.exists(), timeout=30, what="the call's receipt")
    doomed.kill()
    stack.start_worker("successor")
    return submission_id


@pytest.fixture
def device_stack(stack):
    stack.env["IMPO_DEVICE_TOOL_TIMEOUT_SECONDS"] = str(DEVICE_TIMEOUT_SECONDS)
    return stack


def test_a_read_tools_result_is_given_to_the_agent(workers, api):

    run = settled_run(post_message(api, '/tool current_time {"timeZone": "Europe/Paris"}')["submissionId"])

    assert run.state == RunState.COMPLETED
    receipt = ToolReceipt.objects.get()
    assert receipt.result["output"]["timeZone"] == "Europe/Paris"
    assert reply(run) == tool_reply("current_time", receipt.result)
    assert receipt.submitted_at is not None
    types = event_types(run.submission_id)
    assert types.index("tool.requested") < types.index("tool.completed") < types.index("run.completed")


def test_a_read_tool_is_repeated_when_its_worker_dies_mid_call(stack, api):
    doomed = stack.start_worker("doomed")
    stack.start_sweeper()
    with notes_table_locked():
        submission_id = post_message(api, "/tool list_notes")["submissionId"]
        wait_until(
            lambda: ToolCall.objects.filter(tool_name="list_notes", state=ToolCallState.DISPATCHED).exists(),
            timeout=30,
            what="the read to be dispatched",
        )
        doomed.kill()
    stack.start_worker("successor")

    run = settled_run(submission_id)

    assert run.state == RunState.COMPLETED
    call = ToolCall.objects.get()
    assert (call.state, call.attempts) == (ToolCallState.SUCCEEDED, 2)
    assert reply(run) == tool_reply("list_notes", {"output": {"notes": []}})


def test_a_read_tool_that_keeps_timing_out_is_reported_to_the_agent_as_a_timeout(workers, api):
    with notes_table_locked():
        run = settled_run(post_message(api, "/tool list_notes")["submissionId"])

    assert run.state == RunState.COMPLETED
    call = ToolCall.objects.select_related("receipt").get()
    assert (call.state, call.attempts, call.error_code) == (ToolCallState.FAILED, 2, "timeout")
    assert reply(run) == tool_reply("list_notes", call.receipt.result)


def test_a_transactional_tool_does_not_act_twice_when_its_worker_dies_before_the_ack(stack, api, rebyte_double):
    submission_id = kill_worker_between_receipt_and_ack(
        stack, api, rebyte_double, '/tool save_note {"text": "buy milk"}'
    )

    run = settled_run(submission_id)

    assert run.state == RunState.COMPLETED
    assert run.attempts == 2
    note = Note.objects.get()
    assert note.text == "buy milk"
    call = ToolCall.objects.get()
    assert (call.state, call.attempts) == (ToolCallState.SUCCEEDED, 1)
    assert reply(run) == tool_reply("save_note", {"output": {"noteId": str(note.id)}})
    assert event_types(submission_id).count("tool.completed") == 1


def test_a_task_created_by_a_redelivered_call_exists_once(stack, api, rebyte_double):
    submission_id = kill_worker_between_receipt_and_ack(
        stack, api, rebyte_double, '/tool create_task {"prompt": "research llamas", "title": "Llamas"}'
    )

    run = settled_run(submission_id)

    assert run.state == RunState.COMPLETED
    task = Task.objects.get()
    assert task.title == "Llamas"
    call = ToolCall.objects.get()
    task_submission = Submission.objects.get(conversation=task.conversation)
    assert task_submission.client_message_id == f"tool-call:{call.call_id}"
    assert call.attempts == 1
    assert f'"taskId":"{task.id}"' in reply(run)


def test_a_task_runs_with_the_narrower_task_catalog(workers, api, rebyte_double):
    main_run = settled_run(post_message(api, '/tool create_task {"prompt": "research llamas"}')["submissionId"])
    task_run = settled_run(Submission.objects.get(conversation__task__isnull=False).id)

    assert (main_run.state, task_run.state) == (RunState.COMPLETED, RunState.COMPLETED)
    assert reply(task_run) == "Echo: research llamas"
    tools_by_session = {
        session["id"]: sorted(tool["name"] for tool in session["agent"]["tools"])
        for session in rebyte_double.state()["sessions"]
    }
    main_session, task_session = (run.remote_turn.session.remote_id for run in (main_run, task_run))
    assert tools_by_session[main_session] == ["create_task", "current_time", "list_notes", "save_note"]
    assert tools_by_session[task_session] == ["current_time", "list_notes", "save_note"]


def test_arguments_violating_the_schema_are_reported_to_the_agent_without_acting(workers, api):

    run = settled_run(post_message(api, '/tool save_note {"text": 5}')["submissionId"])

    assert run.state == RunState.COMPLETED
    assert not Note.objects.exists()
    call = ToolCall.objects.get()
    assert (call.state, call.attempts, call.error_code) == (ToolCallState.FAILED, 0, "invalid_arguments")
    assert reply(run) == tool_reply(
        "save_note", {"error": {"code": "invalid_arguments", "message": "text: 5 is not of type 'string'"}}
    )


def test_a_device_tool_completes_once_its_device_claims_and_reports(device_stack, api):
    device_stack.start_worker()
    device_id = register_device(api)
    submission_id = post_message(api, '/tool play_sound {"sound": "chime"}', deviceId=device_id)["submissionId"]
    wait_until(
        lambda: run_of(submission_id).state == RunState.WAITING_DEVICE,
        timeout=30,
        what="the run to wait for the device",
    )
    assert api.get(f"/api/v1/submissions/{submission_id}").json()["status"] == "waiting_device"

    [invocation] = api.get(f"/api/v1/devices/{device_id}/tool-invocations?status=pending").json()["invocations"]
    device_answers(api, device_id, invocation["invocationId"], "played")

    run = settled_run(submission_id)
    assert run.state == RunState.COMPLETED
    assert reply(run) == tool_reply("play_sound", {"output": "played"})
    types = event_types(submission_id)
    assert types.index("tool.requested") < types.index("tool.accepted") < types.index("tool.completed")


def test_a_device_that_never_answers_leaves_the_call_uncertain_and_the_conversation_goes_on(device_stack, api):
    device_stack.start_worker()
    device_id = register_device(api)

    submission_id = post_message(api, PLAY_CHIME, deviceId=device_id)["submissionId"]
    next_submission_id = post_message(api, "are you still there?", client_message_id="m-2")["submissionId"]

    run = settled_run(submission_id)
    assert run.state == RunState.COMPLETED
    call = ToolCall.objects.select_related("invocation", "receipt").get()
    assert (call.state, call.error_code, call.attempts) == (ToolCallState.UNCERTAIN, "device_timeout", 1)
    assert call.invocation.status == InvocationStatus.EXPIRED
    assert reply(run) == tool_reply("play_sound", call.receipt.result)
    uncertain = Event.objects.get(submission_id=submission_id, type=EventType.TOOL_UNCERTAIN)
    assert uncertain.payload["code"] == "device_timeout"
    following = settled_run(next_submission_id)
    assert (following.state, reply(following)) == (RunState.COMPLETED, "Echo: are you still there?")


def test_an_uncertain_device_call_is_never_repeated_when_its_worker_dies(device_stack, api):
    doomed = device_stack.start_worker("doomed")
    device_stack.start_sweeper()
    device_id = register_device(api)
    submission_id = post_message(api, PLAY_CHIME, deviceId=device_id)["submissionId"]
    invocation = wait_until(lambda: DeviceInvocation.objects.first(), timeout=30, what="the device invocation")
    claim(api, invocation.id, device_id)
    doomed.kill()
    device_stack.start_worker("successor")

    run = settled_run(submission_id)

    assert run.state == RunState.COMPLETED
    assert run.attempts == 2
    assert DeviceInvocation.objects.count() == 1
    call = ToolCall.objects.get()
    assert (call.state, call.attempts) == (ToolCallState.UNCERTAIN, 1)


def test_staff_resolving_an_uncertain_call_in_admin_records_the_finding_for_the_owner(device_stack, api, staff, desk):
    device_stack.start_worker()
    submission_id = post_message(api, PLAY_CHIME, deviceId=register_device(api))["submissionId"]
    settled_run(submission_id)
    call = ToolCall.objects.get()
    response = desk.post("/admin/tools/toolcall/", {"action": "resolve_as_failed", "_selected_action": [str(call.id)]})

    assert response.status_code == 302
    call.refresh_from_db()
    assert (call.state, call.resolution_note) == (ToolCallState.FAILED, "resolved by staff")
    finding = Event.objects.filter(submission_id=submission_id, type=EventType.TOOL_COMPLETED).last()
    assert finding.payload["resolvedByStaff"] is True
    assert staff.username not in json.dumps(finding.payload)
    assert LogEntry.objects.filter(
        user=staff, object_id=str(call.id), change_message="resolved: the action did not happen"
    ).exists()


def test_a_lost_202_of_a_tool_result_is_resent_with_its_key_and_the_tool_acts_once(workers, api, rebyte_double):
    rebyte_double.fault("input_tool_result", "drop_response")

    run = settled_run(post_message(api, '/tool save_note {"text": "call mum"}')["submissionId"])

    assert run.state == RunState.COMPLETED
    note = Note.objects.get()
    assert reply(run) == tool_reply("save_note", {"output": {"noteId": str(note.id)}})
    state = rebyte_double.state()
    results = [event for event in state["input_events"] if event["type"] == "agent.session.input.tool_result"]
    assert len(results) == 1
    assert state["requests"]["input_tool_result"] == 2
    assert results[0]["idempotency_key"] == f"impo-tool-result-{ToolCall.objects.get().id}"


def test_resolving_a_call_that_is_not_uncertain_is_refused(device_stack, api):
    device_stack.start_worker()
    submission_id = post_message(api, '/tool current_time {"timeZone": "UTC"}')["submissionId"]
    settled_run(submission_id)

    with pytest.raises(Conflict) as refused:
        devices.resolve_uncertain_call(ToolCall.objects.get().id, succeeded=True, note="n/a")

    assert refused.value.code == "not_uncertain"


def test_cancelling_before_the_device_claims_withdraws_the_invocation(device_stack, api):
    device_stack.start_worker()
    device_id = register_device(api)
    submission_id = post_message(api, PLAY_CHIME, deviceId=device_id)["submissionId"]
    invocation = wait_until(lambda: DeviceInvocation.objects.first(), timeout=30, what="the device invocation")

    api.post(f"/api/v1/submissions/{submission_id}/cancel", {}, format="json")

    run = settled_run(submission_id)
    assert run.state == RunState.CANCELLED
    call = ToolCall.objects.select_related("invocation").get()
    assert (call.state, call.error_code) == (ToolCallState.FAILED, "invocation_cancelled")
    assert call.invocation.status == InvocationStatus.CANCELLED
    refused = claim(api, invocation.id, device_id)
    assert (refused.status_code, refused.json()["error"]["code"]) == (410, "invocation_cancelled")


def test_cancelling_after_the_device_claimed_ends_the_run_and_refuses_the_result(device_stack, api):
    device_stack.start_worker()
    device_id = register_device(api)
    submission_id = post_message(api, PLAY_CHIME, deviceId=device_id)["submissionId"]
    invocation = wait_until(lambda: DeviceInvocation.objects.first(), timeout=30, what="the device invocation")
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]

    api.post(f"/api/v1/submissions/{submission_id}/cancel", {}, format="json")

    run = settled_run(submission_id)
    assert run.state == RunState.CANCELLED
    result = report(api, invocation.id, device_id, execution_id)
    assert (result.status_code, result.json()["error"]["code"]) == (410, "invocation_cancelled")
    assert ToolCall.objects.get().state == ToolCallState.UNCERTAIN


def test_revoking_the_tool_mid_call_gives_the_agent_permission_revoked_and_the_run_goes_on(device_stack, api):
    device_stack.start_worker()
    device_id = register_device(api)
    submission_id = post_message(api, PLAY_CHIME, deviceId=device_id)["submissionId"]
    wait_until(lambda: DeviceInvocation.objects.first(), timeout=30, what="the device invocation")

    api.post("/api/v1/devices/register", {"installationId": "phone-1", "tools": []}, format="json")

    run = settled_run(submission_id)
    assert run.state == RunState.COMPLETED
    assert reply(run) == tool_reply("play_sound", ToolReceipt.objects.get().result)
    assert ToolReceipt.objects.get().result["error"]["code"] == "permission_revoked"


def test_a_run_released_while_its_turn_waits_for_a_tool_result_settles_and_so_does_the_next_message(
    stack, api, rebyte_double
):
    # The provider refuses the tool result long enough (the SDK's own retries included) that the run is
    # given back while its turn waits; the conversation's next message must neither steer nor block on it.
    rebyte_double.fault("input_tool_result", "http_error", status=503, times=3)
    stack.start_worker("one")
    stack.start_worker("two")
    stack.start_sweeper()

    first = post_message(api, '/tool current_time {"timeZone": "UTC"}')["submissionId"]
    second = post_message(api, "after the tool", client_message_id="m-2")["submissionId"]

    run = settled_run(first)
    assert run.state == RunState.COMPLETED
    assert run.provider_failures == 0 and run.attempts == 1
    assert reply(run) == tool_reply("current_time", ToolReceipt.objects.get().result)
    following = settled_run(second)
    assert (following.state, reply(following)) == (RunState.COMPLETED, "Echo: after the tool")
    assert rebyte_double.state()["steering"] == []
