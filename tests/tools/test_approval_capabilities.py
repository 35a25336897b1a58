"""Approve or deny from a notification (docs/notifications.md "Approve or deny from the notification"): the push
sender's single-use capabilities, spent at `POST /api/v1/approvals/decide` with no session, through the page's own
answer. Capabilities are minted the way the sender mints them for an approval push (`mint_for_call`)."""

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runtime.models import Run, RunState
from tests.tools.test_tool_approval import answer, error_code, parked_call
from tools.capabilities import mint_for_call
from tools.models import ApprovalCapability, ApprovalOutcome, ApprovalStatus, ToolApproval, ToolCallState

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("save_note_needs_approval")]

URL = "/api/v1/approvals/decide"


@pytest.fixture
def device():
    """The service worker's request: no session, no token, and the CSRF check on as a browser would meet it."""
    return APIClient(enforce_csrf_checks=True)


def decide(device, call, decision, token):
    return device.post(URL, {"approvalId": str(call.id), "decision": decision, "capability": token}, format="json")


def approval_of(call) -> ToolApproval:
    return ToolApproval.objects.select_related("tool_call").get(tool_call=call)


def test_a_capability_decides_once_as_the_page_would_and_only_its_hash_is_kept(device, api, user):
    call = parked_call(api)
    tokens = mint_for_call(call.id)

    response = decide(device, call, "approve", tokens["approve"])

    assert response.status_code == 200, response.json()
    assert response.json() == {
        "approvalId": str(call.id),
        "status": "approved",
        "outcome": "approved",
        "decidedAt": response.json()["decidedAt"],
    }
    approval = approval_of(call)
    assert (approval.status, approval.tool_call.state, approval.decided_by) == (
        ApprovalStatus.APPROVED,
        ToolCallState.APPROVED,
        user,
    )
    used = ApprovalCapability.objects.get(approval=approval, decision="approve")
    assert approval.client_decision_id == f"capability:{used.id}" and used.used_at is not None
    assert Run.objects.get(id=call.run_id).state == RunState.QUEUED
    assert used.token_hash == hashlib.sha256(tokens["approve"].encode()).hexdigest()
    stored = {value for row in ApprovalCapability.objects.values_list() for value in row}
    assert not set(tokens.values()) & {str(value) for value in stored}
    history = api.get("/api/v1/conversation").json()["messages"][-1]["tools"][0]["approval"]
    assert history["status"] == "approved"


def test_a_replayed_capability_changes_nothing_and_says_so(device, api):
    call = parked_call(api)
    tokens = mint_for_call(call.id)
    decide(device, call, "deny", tokens["deny"])
    decided = approval_of(call)

    replay = decide(device, call, "deny", tokens["deny"])

    assert (replay.status_code, error_code(replay)) == (409, "capability_used")
    again = approval_of(call)
    assert (again.status, again.outcome, again.decided_at) == (
        ApprovalStatus.DENIED,
        ApprovalOutcome.DENIED,
        decided.decided_at,
    )


def test_once_one_decision_is_used_the_others_capability_is_void(device, api):
    call = parked_call(api)
    tokens = mint_for_call(call.id)
    assert decide(device, call, "approve", tokens["approve"]).status_code == 200

    other = decide(device, call, "deny", tokens["deny"])

    assert (other.status_code, error_code(other)) == (409, "capability_used")
    assert approval_of(call).status == ApprovalStatus.APPROVED
    assert ApprovalCapability.objects.get(decision="deny").used_at is None


def test_an_approval_answered_on_the_page_voids_both_capabilities(device, api):
    call = parked_call(api)
    tokens = mint_for_call(call.id)
    assert answer(api, call, "deny").status_code == 200

    for decision, token in tokens.items():
        response = decide(device, call, decision, token)
        assert (response.status_code, error_code(response)) == (409, "capability_used")
    assert approval_of(call).outcome == ApprovalOutcome.DENIED


def test_a_capability_past_the_approvals_deadline_decides_nothing(device, api):
    call = parked_call(api)
    tokens = mint_for_call(call.id)
    past = timezone.now() - timedelta(seconds=1)
    ToolApproval.objects.filter(tool_call=call).update(expires_at=past)
    ApprovalCapability.objects.update(expires_at=past)

    response = decide(device, call, "approve", tokens["approve"])

    assert (response.status_code, error_code(response)) == (410, "capability_expired")
    assert approval_of(call).status == ApprovalStatus.PENDING
    assert not ApprovalCapability.objects.filter(used_at__isnull=False).exists()
    assert mint_for_call(call.id) is None  # no push offers a decision past the deadline


def test_a_cancelled_runs_capability_is_told_the_run_was_cancelled(device, api):
    call = parked_call(api)
    tokens = mint_for_call(call.id)
    api.post(f"/api/v1/submissions/{Run.objects.get(id=call.run_id).submission_id}/cancel", {}, format="json")

    response = decide(device, call, "approve", tokens["approve"])

    assert (response.status_code, error_code(response)) == (410, "approval_cancelled")
    assert approval_of(call).outcome == ApprovalOutcome.CANCELLED


def test_another_runs_capability_cannot_decide_this_one(device, api, other_api):
    mine, theirs = parked_call(api), parked_call(other_api)
    their_tokens = mint_for_call(theirs.id)
    mint_for_call(mine.id)

    refused = decide(device, mine, "approve", their_tokens["approve"])
    wrong_decision = decide(device, theirs, "deny", their_tokens["approve"])

    assert (refused.status_code, error_code(refused)) == (404, "not_found")
    assert wrong_decision.json()["error"]["message"] == refused.json()["error"]["message"]
    assert approval_of(mine).status == approval_of(theirs).status == ApprovalStatus.PENDING
    assert not ApprovalCapability.objects.filter(used_at__isnull=False).exists()
    assert decide(device, theirs, "approve", their_tokens["approve"]).status_code == 200  # still theirs to use


@pytest.mark.parametrize(
    ("token", "status"),
    [
        ("short", 400),
        ("a" * 31 + "!", 400),
        ("A" * 32, 404),  # well formed, never minted
    ],
)
def test_a_bad_token_is_refused_without_quoting_it(device, api, token, status):
    call = parked_call(api)
    mint_for_call(call.id)

    response = decide(device, call, "approve", token)

    assert response.status_code == status
    assert token not in response.content.decode()
    assert approval_of(call).status == ApprovalStatus.PENDING


def test_a_body_without_its_capability_is_a_bad_request(device, api):
    call = parked_call(api)

    response = device.post(URL, {"approvalId": str(call.id), "decision": "approve"}, format="json")

    assert (response.status_code, error_code(response)) == (400, "invalid_request")
