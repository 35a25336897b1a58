"""Always allow for this tool (docs/api.md "Tool approval"): an approval given with `remember` is the owner's
standing permission for that tool, written in the approval's transaction; the owner's later calls of it run without
asking, until revoked from the account; only tools the registry marks take one; owner-only throughout."""

import pytest

from runtime.models import Run
from runtime.services import claims
from tests.devices import register_device
from tests.tools.test_tool_approval import answer, error_code, parked_call
from tools import services
from tools.models import ApprovalStatus, ToolApproval, ToolCallState, ToolPermission
from tools.registry import registry

pytestmark = pytest.mark.django_db


def record_another_call(call, *, call_id="call_2", arguments=None):
    """The approved run, claimed again by a worker, records the agent's next call of the same tool."""
    lease = claims.claim_run(call.run_id, "worker-b")
    with claims.fenced(lease) as locked:
        later, events = services.record_call(
            locked, call_id=call_id, name=call.tool_name, arguments=arguments or {"text": "buy bread"}
        )
        locked.append(events)
    return later


def test_approve_and_remember_lets_the_next_call_of_that_tool_run_without_asking(api, user, save_note_needs_approval):
    call = parked_call(api)

    response = answer(api, call, remember=True)

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "approved"
    assert list(ToolPermission.objects.values_list("owner_id", "tool_name")) == [(user.id, "save_note")]
    later = record_another_call(call)
    assert later.state == ToolCallState.REQUESTED  # dispatched as any call needing no approval
    assert not ToolApproval.objects.filter(tool_call=later).exists()
    assert Run.objects.get(id=call.run_id).state != "waiting_approval"
    listed = api.get("/api/v1/account/tool-permissions").json()["toolPermissions"]
    assert [(item["toolName"], item["title"]) for item in listed] == [("save_note", "Save a note")]


def test_an_approval_without_remember_grants_nothing(api, save_note_needs_approval):
    call = parked_call(api)

    answer(api, call)

    assert not ToolPermission.objects.exists()
    assert record_another_call(call).state == ToolCallState.AWAITING_APPROVAL


def test_revoking_asks_again_and_a_second_revoke_is_not_found(api, save_note_needs_approval):
    call = parked_call(api)
    answer(api, call, remember=True)

    revoked = api.delete("/api/v1/account/tool-permissions/save_note")

    assert (revoked.status_code, revoked.json()) == (200, {"revoked": True})
    assert api.get("/api/v1/account/tool-permissions").json() == {"toolPermissions": []}
    assert record_another_call(call).state == ToolCallState.AWAITING_APPROVAL
    again = api.delete("/api/v1/account/tool-permissions/save_note")
    assert (again.status_code, error_code(again)) == (404, "not_found")


def test_a_tool_not_marked_refuses_remember_and_decides_nothing(api, settings):
    settings.IMPO_TOOL_APPROVAL = {}
    assert not registry.get("play_sound").always_allowable  # a device tool, acting in the user's room
    device_id = register_device(api)
    call = parked_call(
        api, '/tool play_sound {"sound": "chime"}', device_id=device_id, name="play_sound", arguments={"sound": "chime"}
    )

    response = answer(api, call, remember=True)

    assert (response.status_code, error_code(response)) == (400, "always_allow_not_offered")
    assert ToolApproval.objects.get(tool_call=call).status == ApprovalStatus.PENDING
    assert not ToolPermission.objects.exists()


def test_remember_only_goes_with_an_approval(api, save_note_needs_approval):
    call = parked_call(api)

    response = answer(api, call, "deny", remember=True)

    assert (response.status_code, error_code(response)) == (400, "invalid_request")
    assert "remember" in response.json()["error"]["fields"]
    assert ToolApproval.objects.get(tool_call=call).status == ApprovalStatus.PENDING


def test_the_same_decision_id_with_and_without_remember_is_a_conflict(api, save_note_needs_approval):
    call = parked_call(api)
    answer(api, call)

    response = answer(api, call, remember=True)

    assert (response.status_code, error_code(response)) == (409, "idempotency_conflict")
    assert not ToolPermission.objects.exists()


def test_a_grant_is_the_owners_alone(api, other_api, user, other_user, save_note_needs_approval):
    call = parked_call(api)
    answer(api, call, remember=True)

    assert other_api.get("/api/v1/account/tool-permissions").json() == {"toolPermissions": []}
    revoked = other_api.delete("/api/v1/account/tool-permissions/save_note")
    assert (revoked.status_code, error_code(revoked)) == (404, "not_found")
    assert ToolPermission.objects.filter(owner=user).count() == 1
    # The other user's own call of the tool is still asked.
    theirs = parked_call(other_api)
    assert theirs.state == ToolCallState.AWAITING_APPROVAL
    refused = answer(other_api, call, remember=True)
    assert (refused.status_code, error_code(refused)) == (404, "not_found")
    assert not ToolPermission.objects.filter(owner=other_user).exists()


@pytest.mark.parametrize("name", ["no_such_tool", "save%00note", "x" * 65])
def test_an_unknown_or_impossible_tool_name_is_not_found(api, name):
    response = api.delete(f"/api/v1/account/tool-permissions/{name}")

    assert (response.status_code, error_code(response)) == (404, "not_found")
