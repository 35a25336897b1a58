"""Tool approval (docs/api.md "Tool approval"): the policy, and the answer endpoint against a parked run.

The run is parked the way its worker parks it (a fenced record of the call, then `await_approval`); the
worker-driven path, with real processes, is in test_tool_approval_by_workers.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from runtime.models import Event, EventType, Run, RunState
from runtime.services import claims, lifecycle, sweeper
from tests.client import send_message
from tests.devices import register_device
from tools import services
from tools.definitions import EVERYWHERE, MAIN_CHAT_ONLY
from tools.models import (
    ApprovalOutcome,
    ApprovalStatus,
    DeviceInvocation,
    SideEffect,
    ToolApproval,
    ToolCall,
    ToolCallState,
    ToolReceipt,
)
from tools.receipts import tool_result_text
from tools.registry import Approval, ToolDefinition, registry

pytestmark = pytest.mark.django_db

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}},
    "required": ["text"],
    "additionalProperties": False,
}


def definition(**fields) -> ToolDefinition:
    return ToolDefinition(
        **{
            "name": "send_mail",
            "description": "Sends a mail.",
            "input_schema": NOTE_SCHEMA,
            "side_effect": SideEffect.TRANSACTIONAL,
            "contexts": EVERYWHERE,
            "timeout_seconds": 5.0,
            "handler": lambda call: {},
            **fields,
        }
    )


def parked_call(api, text='/tool save_note {"text": "buy milk"}', *, device_id=None, name="save_note", arguments=None):
    """A call recorded by a worker holding the run's lease, which then parked the run for its approval."""
    body = {"clientMessageId": "m-1", "text": text}
    if device_id:
        body["deviceId"] = device_id
    receipt = api.post("/api/v1/conversation/messages", body, format="json").json()
    run = Run.objects.get(submission_id=receipt["submissionId"])
    lease = claims.claim_run(run.id, "worker-a")
    with claims.fenced(lease) as locked:
        call, events = services.record_call(
            locked, call_id="call_1", name=name, arguments=arguments or {"text": "buy milk"}
        )
        locked.append(events)
        assert call.state == ToolCallState.AWAITING_APPROVAL
        lifecycle.await_approval(locked)
    return call


def answer(api, call, decision="approve", *, client_decision_id="d-1", **fields):
    body = {"decision": decision, "clientDecisionId": client_decision_id, **fields}
    return api.post(f"/api/v1/tool-calls/{call.id}/approval", body, format="json")


def error_code(response):
    return response.json()["error"]["code"]


# --- the policy -------------------------------------------------------------------------------------------


def test_approval_is_on_by_default_for_a_tool_acting_outside_impo_that_cannot_be_repeated(settings):
    settings.IMPO_TOOL_APPROVAL = {}

    assert definition(acts_outside_impo=True).requires_approval({"text": "hi"})
    assert not definition(acts_outside_impo=True, side_effect=SideEffect.READ).requires_approval({"text": "hi"})
    assert not definition().requires_approval({"text": "hi"})
    assert registry.get("play_sound").requires_approval({"sound": "chime"})
    assert not registry.get("save_note").requires_approval({"text": "hi"})


def test_a_per_call_policy_decides_from_the_arguments(settings):
    settings.IMPO_TOOL_APPROVAL = {}
    mail = definition(acts_outside_impo=True, approval=lambda arguments: "boss" in arguments["text"])

    assert mail.requires_approval({"text": "to the boss"})
    assert not mail.requires_approval({"text": "to a friend"})


def test_the_operator_setting_overrides_a_definitions_policy(settings):
    settings.IMPO_TOOL_APPROVAL = {"save_note": Approval.ALWAYS, "play_sound": Approval.NEVER}

    assert registry.get("save_note").requires_approval({"text": "hi"})
    assert not registry.get("play_sound").requires_approval({"sound": "chime"})


def test_a_device_tool_must_say_it_acts_outside_impo():
    with pytest.raises(ValueError, match="acts outside Impo"):
        definition(side_effect=SideEffect.UNCERTAIN, device=True, handler=None, contexts=MAIN_CHAT_ONLY)


# --- the answer ---------------------------------------------------------------------------------------------


def test_a_call_needing_approval_parks_its_run_without_a_lease(api, save_note_needs_approval):
    call = parked_call(api)

    run = Run.objects.get(id=call.run_id)
    assert (run.state, run.lease_owner, run.lease_expires_at) == (RunState.WAITING_APPROVAL, "", None)
    assert claims.claim_run(run.id, "worker-b") is None
    approval = ToolApproval.objects.get(tool_call=call)
    assert (approval.status, approval.requested_arguments) == (ApprovalStatus.PENDING, {"text": "buy milk"})
    requested = Event.objects.get(type=EventType.TOOL_APPROVAL_REQUESTED)
    assert requested.payload["approvalId"] == str(call.id)
    assert api.get(f"/api/v1/submissions/{run.submission_id}").json()["status"] == "waiting_approval"
    [tool] = api.get("/api/v1/conversation").json()["messages"][-1]["tools"]
    assert tool["state"] == "awaiting_approval"
    assert tool["approval"]["approvalId"] == str(call.id)


def test_approving_records_one_decision_and_makes_the_run_claimable(api, user, save_note_needs_approval):
    call = parked_call(api)

    response = answer(api, call)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["status"], body["outcome"], body["replayed"]) == ("approved", "approved", False)
    assert body["input"] == {"text": "buy milk"}
    call.refresh_from_db()
    assert call.state == ToolCallState.APPROVED
    assert ToolApproval.objects.get(tool_call=call).decided_by == user
    run = Run.objects.get(id=call.run_id)
    assert run.state == RunState.QUEUED
    assert claims.claim_run(run.id, "worker-b") is not None


def test_denying_settles_the_call_with_the_reason_the_agent_reads(api, save_note_needs_approval):
    call = parked_call(api)

    response = answer(api, call, "deny", reason="not today")

    assert response.status_code == 200
    call.refresh_from_db()
    assert (call.state, call.error_code) == (ToolCallState.FAILED, "approval_denied")
    receipt = ToolReceipt.objects.get(tool_call=call)
    assert tool_result_text(receipt.result) == "approval_denied: The user denied this call: not today"
    assert Run.objects.get(id=call.run_id).state == RunState.QUEUED


def test_edited_arguments_replace_the_agents_and_the_asked_ones_are_kept(api, save_note_needs_approval):
    call = parked_call(api)

    response = answer(api, call, arguments={"text": "buy oat milk"})

    assert (response.status_code, response.json()["outcome"]) == (200, "edited")
    call.refresh_from_db()
    assert call.arguments == {"text": "buy oat milk"}
    assert ToolApproval.objects.get(tool_call=call).requested_arguments == {"text": "buy milk"}


def test_edited_arguments_that_break_the_tools_schema_are_refused_and_decide_nothing(api, save_note_needs_approval):
    call = parked_call(api)

    response = answer(api, call, arguments={"text": 5})

    assert (response.status_code, error_code(response)) == (400, "invalid_request")
    assert response.json()["error"]["message"] == "arguments: text: 5 is not of type 'string'"
    assert ToolApproval.objects.get(tool_call=call).status == ApprovalStatus.PENDING
    assert Run.objects.get(id=call.run_id).state == RunState.WAITING_APPROVAL


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"decision": "maybe", "clientDecisionId": "d"}, "decision"),
        ({"decision": "approve"}, "clientDecisionId"),
        ({"decision": "approve", "clientDecisionId": " "}, "clientDecisionId"),
        ({"decision": "approve", "clientDecisionId": "d", "extra": 1}, "extra"),
        ({"decision": "deny", "clientDecisionId": "d", "arguments": {"text": "x"}}, "arguments"),
        ({"decision": "approve", "clientDecisionId": "d", "reason": "why"}, "reason"),
        ({"decision": "approve", "clientDecisionId": "d", "arguments": ["x"]}, "arguments"),
    ],
)
def test_a_bad_answer_is_refused_and_decides_nothing(api, save_note_needs_approval, body, fragment):
    call = parked_call(api)

    response = api.post(f"/api/v1/tool-calls/{call.id}/approval", body, format="json")

    assert (response.status_code, error_code(response)) == (400, "invalid_request")
    assert fragment in response.json()["error"]["message"]
    assert ToolApproval.objects.get(tool_call=call).status == ApprovalStatus.PENDING


def test_another_users_call_is_not_found(api, other_api, save_note_needs_approval):
    call = parked_call(api)

    response = answer(other_api, call)

    assert (response.status_code, error_code(response)) == (404, "not_found")
    assert ToolApproval.objects.get(tool_call=call).status == ApprovalStatus.PENDING


def test_a_path_id_that_is_not_a_uuid_is_a_bad_request(api):
    response = api.post("/api/v1/tool-calls/call_1/approval", {"decision": "approve", "clientDecisionId": "d"})

    assert response.status_code == 400


def test_replaying_an_answer_returns_the_recorded_decision(api, save_note_needs_approval):
    call = parked_call(api)
    first = answer(api, call, "deny", reason="no")

    again = answer(api, call, "deny", reason="no")

    assert again.status_code == 200
    assert {**again.json(), "replayed": False} == first.json()
    assert again.json()["replayed"] is True
    assert Event.objects.filter(type=EventType.TOOL_APPROVAL_DECIDED).count() == 1


def test_the_same_client_decision_id_with_another_answer_is_a_conflict(api, save_note_needs_approval):
    call = parked_call(api)
    answer(api, call)

    response = answer(api, call, "deny")

    assert (response.status_code, error_code(response)) == (409, "idempotency_conflict")


def test_a_second_device_answering_differently_is_a_conflict_and_the_same_answer_a_replay(
    api, save_note_needs_approval
):
    call = parked_call(api)
    answer(api, call, client_decision_id="phone")

    different = answer(api, call, "deny", client_decision_id="laptop")
    same = answer(api, call, client_decision_id="laptop")

    assert (different.status_code, error_code(different)) == (409, "approval_conflict")
    assert (same.status_code, same.json()["replayed"], same.json()["clientDecisionId"]) == (200, True, "phone")
    assert ToolApproval.objects.get(tool_call=call).client_decision_id == "phone"


def test_cancelling_the_run_denies_its_pending_approval_in_the_same_transaction(api, save_note_needs_approval):
    call = parked_call(api)
    run = Run.objects.get(id=call.run_id)

    api.post(f"/api/v1/submissions/{run.submission_id}/cancel", {}, format="json")

    approval = ToolApproval.objects.select_related("tool_call").get(tool_call=call)
    assert (approval.status, approval.outcome) == (ApprovalStatus.DENIED, ApprovalOutcome.CANCELLED)
    assert approval.tool_call.state == ToolCallState.FAILED
    run.refresh_from_db()
    # Back in the queue, for a worker to relay the cancel to the turn still waiting on the call.
    assert (run.state, run.cancel_requested_at is not None) == (RunState.QUEUED, True)
    response = answer(api, call)
    assert (response.status_code, error_code(response)) == (410, "approval_cancelled")


def test_the_sweeper_denies_an_approval_past_its_deadline(api, save_note_needs_approval):
    call = parked_call(api)
    ToolApproval.objects.filter(tool_call=call).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert sweeper.expire_tool_approvals() == 1

    approval = ToolApproval.objects.select_related("tool_call__receipt").get(tool_call=call)
    assert (approval.status, approval.outcome) == (ApprovalStatus.DENIED, ApprovalOutcome.TIMED_OUT)
    assert approval.tool_call.receipt.result["error"]["code"] == "approval_timeout"
    assert Run.objects.get(id=call.run_id).state == RunState.QUEUED
    response = answer(api, call)
    assert (response.status_code, error_code(response)) == (410, "approval_expired")


def test_an_answer_after_the_deadline_is_gone_even_before_the_sweeper_passed(api, save_note_needs_approval):
    call = parked_call(api)
    ToolApproval.objects.filter(tool_call=call).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = answer(api, call)

    assert (response.status_code, error_code(response)) == (410, "approval_expired")
    assert ToolApproval.objects.get(tool_call=call).status == ApprovalStatus.PENDING


def test_an_approved_device_call_opens_its_invocation_only_then(api, settings):
    settings.IMPO_TOOL_APPROVAL = {}
    device_id = register_device(api)
    call = parked_call(
        api, '/tool play_sound {"sound": "chime"}', device_id=device_id, name="play_sound", arguments={"sound": "chime"}
    )
    assert not DeviceInvocation.objects.exists()

    answer(api, call)

    invocation = DeviceInvocation.objects.select_related("tool_call").get()
    assert (invocation.tool_call_id, invocation.tool_call.state) == (call.id, ToolCallState.DISPATCHED)
    decided = Event.objects.get(type=EventType.TOOL_APPROVAL_DECIDED)
    assert decided.payload["device"]["invocationId"] == str(invocation.id)
    listed = api.get(f"/api/v1/devices/{device_id}/tool-invocations").json()["invocations"]
    assert [item["invocationId"] for item in listed] == [str(invocation.id)]


def test_a_call_that_asked_no_approval_has_none_to_answer(api, settings):
    settings.IMPO_TOOL_APPROVAL = {}
    receipt = send_message(api, "hi", client_message_id="m-1").json()
    lease = claims.claim_run(Run.objects.get(submission_id=receipt["submissionId"]).id, "worker-a")
    with claims.fenced(lease) as locked:
        call, events = services.record_call(locked, call_id="call_1", name="save_note", arguments={"text": "hi"})
        locked.append(events)

    response = answer(api, ToolCall.objects.get(id=call.id))

    assert (response.status_code, error_code(response)) == (404, "not_found")


def test_the_admin_lists_pending_approvals_oldest_first(api, other_api, save_note_needs_approval, desk):
    older = parked_call(api)
    newer = parked_call(other_api)

    index = desk.get("/admin/").content.decode()
    page = desk.get("/admin/tools/toolapproval/?status__exact=pending").content.decode()

    assert 'data-desk="tool_approvals">2<' in index
    assert page.index(str(older.id)) < page.index(str(newer.id))
