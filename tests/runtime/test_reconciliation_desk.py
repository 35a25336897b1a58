"""Django admin as the staff's reconciliation desk."""

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from runtime.models import Event, Run, RunState
from tests.client import post_message
from tests.factories import ToolCallFactory, UserFactory
from tools.models import ToolCall, ToolCallState

pytestmark = pytest.mark.django_db


def parked_run(api, client_message_id="m-1") -> Run:
    receipt = post_message(api, client_message_id=client_message_id)
    Run.objects.filter(submission_id=receipt["submissionId"]).update(
        state=RunState.PENDING_RECONCILIATION, error_code="pending_reconciliation", error_message="unknown outcome"
    )
    return Run.objects.get(submission_id=receipt["submissionId"])


def uncertain_call(run: Run) -> ToolCall:
    return ToolCallFactory(
        run=run, call_id="call-1", tool_name="play_sound", arguments={"sound": "chime"}, state=ToolCallState.UNCERTAIN
    )


def test_the_admin_index_counts_what_waits_for_a_person(desk, api):
    uncertain_call(parked_run(api))
    post_message(api, client_message_id="m-2")  # an ordinary queued run waits for nobody

    page = desk.get("/admin/").content.decode()

    assert 'data-desk="runs">1<' in page
    assert 'data-desk="tool_calls">1<' in page
    assert 'data-desk="creation_intents">0<' in page
    assert "/admin/runtime/run/?state__exact=pending_reconciliation" in page


def test_a_parked_run_has_resolve_buttons_and_failing_it_tells_the_owner_staff_resolved_it(desk, api, staff):
    run = parked_run(api)
    change_page = desk.get(f"/admin/runtime/run/{run.id}/change/").content.decode()
    assert "Mark failed" in change_page and "Re-check now" in change_page

    response = desk.post(f"/admin/runtime/run/{run.id}/desk/fail/", follow=True)

    assert "Marked failed: the owner sees it was resolved by staff." in response.content.decode()
    run.refresh_from_db()
    assert run.state == RunState.FAILED
    error = api.get("/api/v1/conversation").json()["messages"][-1]["error"]
    assert "resolved by staff" in error["message"]
    assert staff.username not in error["message"]
    assert LogEntry.objects.filter(user=staff, object_id=str(run.id)).exists()


def test_a_finished_run_offers_no_resolve_buttons_and_refuses_a_stale_one(desk, api):
    receipt = post_message(api)
    run = Run.objects.get(submission_id=receipt["submissionId"])

    change_page = desk.get(f"/admin/runtime/run/{run.id}/change/").content.decode()
    response = desk.post(f"/admin/runtime/run/{run.id}/desk/fail/", follow=True)

    assert "Mark failed" not in change_page
    assert "does not apply" in response.content.decode()
    run.refresh_from_db()
    assert run.state == RunState.QUEUED


def test_resolving_an_uncertain_tool_call_says_so_and_names_staff_not_the_clerk(desk, api, staff):
    call = uncertain_call(parked_run(api))

    response = desk.post(f"/admin/tools/toolcall/{call.id}/desk/did-not-happen/", follow=True)

    assert "Resolved: the action did not happen; the run goes on." in response.content.decode()
    [tool] = api.get("/api/v1/conversation").json()["messages"][-1]["tools"]
    assert (tool["state"], tool["errorCode"]) == ("failed", "reconciled_failed")
    assert tool["errorMessage"] == "resolved by staff"


def test_resolving_a_call_of_a_run_that_already_ended_does_not_say_the_run_goes_on(desk, api):
    run = parked_run(api)
    call = uncertain_call(run)
    Run.objects.filter(id=run.id).update(state=RunState.FAILED, error_code="device_timeout")

    response = desk.post(f"/admin/tools/toolcall/{call.id}/desk/happened/", follow=True)

    page = response.content.decode()
    assert "Recorded: the action did happen. Its run had already ended (failed)." in page
    assert "the run goes on" not in page


def test_resolve_buttons_need_a_post(desk, api):
    run = parked_run(api)

    assert desk.get(f"/admin/runtime/run/{run.id}/desk/fail/").status_code == 405


def test_audit_records_are_read_only_in_the_admin(desk, api):
    post_message(api)
    event = Event.objects.first()

    assert desk.get("/admin/runtime/event/add/").status_code == 403
    page = desk.get(f"/admin/runtime/event/{event.id}/change/").content.decode()
    assert 'name="_save"' not in page
    assert desk.post(f"/admin/runtime/event/{event.id}/delete/").status_code == 403
    assert desk.get("/admin/runtime/submission/add/").status_code == 403
    assert desk.get("/admin/runtime/message/add/").status_code == 403


def test_runs_are_listed_newest_first_with_owner_conversation_and_created_time(desk, api, user):
    older = Run.objects.get(submission_id=post_message(api, client_message_id="m-1")["submissionId"])
    newer = Run.objects.get(submission_id=post_message(api, client_message_id="m-2")["submissionId"])

    page = desk.get("/admin/runtime/run/").content.decode()

    assert page.index(str(newer.id)) < page.index(str(older.id))
    for column in ("column-owner", "column-conversation", "column-created_at"):
        assert column in page
    assert user.username in page


def test_staff_who_may_only_view_runs_get_no_resolve_buttons_and_cannot_post_one(api):
    viewer = UserFactory(username="desk-viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    client = Client()
    client.force_login(viewer)
    run = parked_run(api)

    page = client.get(f"/admin/runtime/run/{run.id}/change/").content.decode()
    response = client.post(f"/admin/runtime/run/{run.id}/desk/fail/")

    assert "Mark failed" not in page
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.state == RunState.PENDING_RECONCILIATION
