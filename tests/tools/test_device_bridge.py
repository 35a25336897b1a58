"""The ICA v1 device bridge (docs/design.md §4): registration, pending invocations, claims and results."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runtime.models import Event, EventType, Run
from runtime.services import claims
from tests.client import send_message
from tests.devices import claim, register_device, report
from tools import device_bridge, services
from tools.models import DeviceInvocation, InvocationStatus, ToolCall, ToolCallState, ToolReceipt

pytestmark = pytest.mark.django_db


@pytest.fixture
def device_id(api):
    return register_device(api)


@pytest.fixture
def invocation(api, device_id) -> DeviceInvocation:
    """A play_sound call recorded by a worker holding the run's lease, waiting for the device."""
    receipt = send_message(api, "/tool play_sound", client_message_id="m-1", deviceId=device_id).json()
    run = Run.objects.get(submission_id=receipt["submissionId"])
    lease = claims.claim_run(run.id, "worker-a")
    with claims.fenced(lease) as locked:
        _, events = services.record_call(locked, call_id="call_1", name="play_sound", arguments={"sound": "chime"})
        locked.append(events)
    return DeviceInvocation.objects.select_related("tool_call").get(tool_call__call_id="call_1")


def error_code(response):
    return response.json()["error"]["code"]


def expire(invocation):
    DeviceInvocation.objects.filter(id=invocation.id).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_registering_the_same_installation_again_returns_the_same_device(api):
    assert register_device(api, "phone-1") == register_device(api, "phone-1", tools=["play_sound", "vibrate"])


def test_another_users_installation_with_the_same_id_is_another_device(api, other_api):
    assert register_device(api, "phone-1") != register_device(other_api, "phone-1")


def test_registration_rejects_unknown_fields(api):
    response = api.post("/api/v1/devices/register", {"installationId": "x", "tools": [], "name": "x"}, format="json")

    assert response.status_code == 400
    assert error_code(response) == "invalid_request"


def test_a_device_tool_call_is_listed_as_pending_for_its_device(api, invocation, device_id):
    response = api.get(f"/api/v1/devices/{device_id}/tool-invocations?status=pending")

    assert response.status_code == 200
    [listed] = response.json()["invocations"]
    assert listed["invocationId"] == str(invocation.id)
    assert listed["toolCallId"] == "call_1"
    assert listed["deviceId"] == device_id
    assert listed["toolName"] == "play_sound"
    assert listed["input"] == {"sound": "chime"}
    assert listed["expiresAt"]


def test_a_claimed_but_unfinished_invocation_is_still_listed(api, invocation, device_id):
    claim(api, invocation.id, device_id)

    [listed] = api.get(f"/api/v1/devices/{device_id}/tool-invocations?status=pending").json()["invocations"]
    assert listed["status"] == "claimed"


def test_another_users_device_invocations_are_not_found(other_api, device_id):
    response = other_api.get(f"/api/v1/devices/{device_id}/tool-invocations?status=pending")

    assert response.status_code == 404


def test_the_tool_requested_event_tells_the_stream_which_device_must_act(invocation, device_id):
    event = Event.objects.get(type=EventType.TOOL_REQUESTED)

    assert event.payload["toolCallId"] == "call_1"
    assert event.payload["device"] == {
        "invocationId": str(invocation.id),
        "deviceId": device_id,
        "expiresAt": invocation.expires_at.isoformat(),
    }


def test_a_claim_returns_an_execution_and_marks_the_call_accepted(api, invocation, device_id):
    response = claim(api, invocation.id, device_id)

    assert response.status_code == 200
    assert response.json()["executionId"]
    assert ToolCall.objects.get(call_id="call_1").state == ToolCallState.ACCEPTED
    assert Event.objects.filter(type=EventType.TOOL_ACCEPTED).count() == 1


def test_the_same_device_claiming_again_gets_the_same_execution(api, invocation, device_id):
    first = claim(api, invocation.id, device_id).json()

    assert claim(api, invocation.id, device_id).json() == first
    assert Event.objects.filter(type=EventType.TOOL_ACCEPTED).count() == 1


def test_another_user_claiming_gets_not_found(other_api, invocation, device_id):
    assert claim(other_api, invocation.id, device_id).status_code == 404


def test_another_device_of_the_user_claiming_gets_not_found(api, invocation):
    response = claim(api, invocation.id, register_device(api, "tablet-1"))

    assert response.status_code == 404
    assert error_code(response) == "not_found"


def test_claiming_an_expired_invocation_is_gone(api, invocation, device_id):
    expire(invocation)

    response = claim(api, invocation.id, device_id)

    assert response.status_code == 410
    assert error_code(response) == "invocation_expired"


def test_claiming_an_invocation_of_a_cancelled_run_is_gone_as_cancelled(api, invocation, device_id):
    api.post(f"/api/v1/submissions/{invocation.tool_call.run.submission_id}/cancel", {}, format="json")

    response = claim(api, invocation.id, device_id)

    assert response.status_code == 410
    assert error_code(response) == "invocation_cancelled"


def test_a_cancelled_runs_claimed_invocation_leaves_the_pending_list(api, invocation, device_id):
    claim(api, invocation.id, device_id)

    api.post(f"/api/v1/submissions/{invocation.tool_call.run.submission_id}/cancel", {}, format="json")

    assert api.get(f"/api/v1/devices/{device_id}/tool-invocations?status=pending").json() == {"invocations": []}


def test_a_result_for_a_claimed_invocation_of_a_cancelled_run_is_gone_as_cancelled(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]
    api.post(f"/api/v1/submissions/{invocation.tool_call.run.submission_id}/cancel", {}, format="json")

    response = report(api, invocation.id, device_id, execution_id)

    assert response.status_code == 410
    assert error_code(response) == "invocation_cancelled"
    assert not ToolReceipt.objects.exists()


def test_withdrawing_a_claimed_invocation_makes_its_call_uncertain(invocation, device_id, api):
    claim(api, invocation.id, device_id)
    run = invocation.tool_call.run
    api.post(f"/api/v1/submissions/{run.submission_id}/cancel", {}, format="json")
    # worker-a sent the input and died; worker-b takes over to relay the cancel
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now(), input_sent_at=timezone.now())

    with claims.fenced(claims.claim_run(run.id, "worker-b")) as locked:
        receipt, events = device_bridge.withdraw_invocation(locked, "call_1")
        locked.append(events)

    assert receipt.result["error"]["code"] == "invocation_cancelled"
    assert ToolCall.objects.get(call_id="call_1").state == ToolCallState.UNCERTAIN
    assert DeviceInvocation.objects.get(id=invocation.id).status == InvocationStatus.CANCELLED


def test_re_registering_without_the_tool_takes_its_invocation_off_the_pending_list(api, invocation, device_id):
    register_device(api, tools=["vibrate"])

    assert api.get(f"/api/v1/devices/{device_id}/tool-invocations?status=pending").json() == {"invocations": []}


def test_re_registering_without_the_tool_gives_the_agent_a_permission_revoked_error(api, invocation, device_id):
    register_device(api, tools=[])

    call = ToolCall.objects.select_related("receipt").get(call_id="call_1")
    assert call.state == ToolCallState.FAILED
    assert call.receipt.result["error"]["code"] == "permission_revoked"


def test_claiming_a_revoked_invocation_is_gone_as_permission_revoked(api, invocation, device_id):
    register_device(api, tools=[])

    response = claim(api, invocation.id, device_id)

    assert response.status_code == 410
    assert error_code(response) == "permission_revoked"


def test_a_result_for_a_claimed_then_revoked_invocation_is_gone_as_permission_revoked(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]
    register_device(api, tools=[])

    response = report(api, invocation.id, device_id, execution_id)

    assert response.status_code == 410
    assert error_code(response) == "permission_revoked"
    assert ToolCall.objects.get(call_id="call_1").state == ToolCallState.UNCERTAIN


def test_re_registering_with_the_same_tools_keeps_the_invocation_pending(api, invocation, device_id):
    register_device(api, tools=["play_sound"])

    assert DeviceInvocation.objects.get(id=invocation.id).status == InvocationStatus.PENDING


def test_a_result_is_saved_as_the_calls_receipt(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]

    response = report(api, invocation.id, device_id, execution_id)

    assert response.status_code == 200
    assert response.json() == {"accepted": True, "duplicate": False}
    call = ToolCall.objects.select_related("receipt").get(call_id="call_1")
    assert call.state == ToolCallState.SUCCEEDED
    assert call.receipt.result == {"output": {"played": True}}
    completed = Event.objects.get(type=EventType.TOOL_COMPLETED)
    assert completed.payload["output"] == {"played": True}


def test_a_reported_failure_is_saved_as_an_error_receipt(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]

    report(api, invocation.id, device_id, execution_id, success=False, output=None, error="speaker muted")

    call = ToolCall.objects.select_related("receipt").get(call_id="call_1")
    assert call.state == ToolCallState.FAILED
    assert call.receipt.result == {"error": {"code": "device_error", "message": "speaker muted"}}


def test_an_identical_result_retry_is_accepted_as_a_duplicate_even_after_completion(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]
    report(api, invocation.id, device_id, execution_id)

    response = report(api, invocation.id, device_id, execution_id)

    assert response.status_code == 200
    assert response.json() == {"accepted": True, "duplicate": True}
    assert Event.objects.filter(type=EventType.TOOL_COMPLETED).count() == 1


def test_an_identical_result_retry_is_a_duplicate_even_after_the_deadline(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]
    report(api, invocation.id, device_id, execution_id)
    expire(invocation)

    response = report(api, invocation.id, device_id, execution_id)

    assert response.status_code == 200
    assert response.json() == {"accepted": True, "duplicate": True}


def test_a_conflicting_result_retry_is_an_idempotency_conflict(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]
    report(api, invocation.id, device_id, execution_id)

    response = report(api, invocation.id, device_id, execution_id, output={"played": False})

    assert response.status_code == 409
    assert error_code(response) == "idempotency_conflict"


def test_a_result_for_another_execution_is_refused(api, invocation, device_id):
    claim(api, invocation.id, device_id)

    response = report(api, invocation.id, device_id, "00000000-0000-0000-0000-000000000000")

    assert response.status_code == 409
    assert error_code(response) == "execution_mismatch"


def test_a_result_for_an_unclaimed_invocation_is_refused(api, invocation, device_id):
    response = report(api, invocation.id, device_id, "00000000-0000-0000-0000-000000000000")

    assert response.status_code == 409
    assert error_code(response) == "invocation_not_claimed"


def test_a_first_result_after_the_deadline_is_gone(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]
    expire(invocation)

    response = report(api, invocation.id, device_id, execution_id)

    assert response.status_code == 410
    assert error_code(response) == "invocation_expired"
    assert ToolCall.objects.get(call_id="call_1").state == ToolCallState.ACCEPTED


def test_another_user_reporting_a_result_gets_not_found(api, other_api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]

    assert report(other_api, invocation.id, device_id, execution_id).status_code == 404


def test_a_result_from_another_device_of_the_user_gets_not_found(api, invocation, device_id):
    execution_id = claim(api, invocation.id, device_id).json()["executionId"]

    response = report(api, invocation.id, register_device(api, "tablet-1"), execution_id)

    assert response.status_code == 404
    assert error_code(response) == "not_found"
