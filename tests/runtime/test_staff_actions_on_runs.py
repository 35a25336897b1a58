"""Staff actions on runs from the admin: retry a failed run, cancel many; each audited, none open to non-staff."""

import uuid

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from rebyte.models import RemoteTurn
from runtime import selectors
from runtime.execution import retries
from runtime.models import Event, EventType, Message, Run, RunState, StaffRunAction
from tests.client import finished_run, post_message
from tests.factories import RemoteTurnFactory, UserFactory

RUNS = "/admin/runtime/run/"


def queued_run(api, client_message_id: str, text: str = "hello") -> Run:
    """The run of a message just posted (no worker has taken it)."""
    receipt = post_message(api, text, client_message_id=client_message_id)
    return Run.objects.select_related("submission").get(submission_id=receipt["submissionId"])


def act(client: Client, action: str, runs: list[Run]):
    return client.post(RUNS, {"action": action, "_selected_action": [str(run.id) for run in runs]}, follow=True)


def failed(run: Run) -> Run:
    Run.objects.filter(id=run.id).update(
        state=RunState.FAILED, error_code="provider_error", error_message="refused", attempts=3, input_sent_at=None
    )
    Message.objects.filter(id=run.submission.assistant_message_id).update(text="Ech", status="failed")
    return Run.objects.select_related("submission").get(id=run.id)


def test_a_failed_run_retried_by_staff_completes_on_the_same_submission(workers, api, rebyte_double, staff, desk):
    finished_run(queued_run(api, "m-0", "warm up").submission_id)
    rebyte_double.fault("input_message", "http_error", status=400)
    run = finished_run(queued_run(api, "m-1", "second try works").submission_id)
    assert (run.state, run.error_code) == (RunState.FAILED, "provider_error")

    page = act(desk, "retry_failed", [run]).content.decode()

    assert "1 queued again" in page
    retried = finished_run(run.submission_id)
    assert (retried.id, retried.state, retried.retries) == (run.id, RunState.COMPLETED, 1)
    body = api.get(f"/api/v1/submissions/{run.submission_id}").json()
    assert (body["status"], body["error"]) == ("completed", None)
    reply = api.get("/api/v1/conversation").json()["messages"][-1]
    assert (reply["id"], reply["text"], reply["status"]) == (body["messageId"], "Echo: second try works", "completed")
    keys = [event["idempotency_key"] for event in rebyte_double.state()["input_events"]]
    assert keys[-1] == f"impo-run-{run.id}-retry-1"
    replayed = [event["type"] for event in selectors.current_attempt_events(run.submission_id)]
    assert replayed[0] == "submission.accepted" and replayed[-1] == "run.completed"
    assert "run.failed" not in replayed
    [audit] = StaffRunAction.objects.all()
    assert (audit.actor, audit.kind, audit.run_id, audit.outcome) == (staff, "retry", run.id, "queued_again")


def test_retrying_resets_the_failure_and_drops_the_binding_to_the_failed_turn(api, staff):
    run = failed(queued_run(api, "m-1"))
    RemoteTurnFactory(run=run, turn_id="turn-that-failed", projected={"item-1": 3})

    outcome = retries.staff_retry_failed_run(run.id, actor=staff, batch=uuid.uuid4())

    assert outcome == "queued_again"
    run.refresh_from_db()
    assert (run.state, run.error_code, run.attempts, run.retries, run.finished_at) == ("queued", "", 0, 1, None)
    assert not RemoteTurn.objects.filter(run=run).exists()
    reply = Message.objects.get(id=run.submission.assistant_message_id)
    assert (reply.text, reply.status) == ("", "pending")
    accepted = Event.objects.filter(submission_id=run.submission_id, type=EventType.SUBMISSION_ACCEPTED).last()
    assert accepted.payload["retry"] == 1 and accepted.payload["status"] == "queued"


def test_a_failed_run_offers_a_retry_button_and_other_runs_do_not(desk, api):
    failed_run = failed(queued_run(api, "m-1"))
    waiting = queued_run(api, "m-2")

    assert "Retry" in desk.get(f"{RUNS}{failed_run.id}/change/").content.decode()
    assert ">Retry<" not in desk.get(f"{RUNS}{waiting.id}/change/").content.decode()


def test_retrying_a_run_that_did_not_fail_changes_nothing_and_says_so(desk, api):
    run = queued_run(api, "m-1")

    page = act(desk, "retry_failed", [run]).content.decode()

    assert "1 not failed" in page
    run.refresh_from_db()
    assert (run.state, run.retries) == (RunState.QUEUED, 0)
    assert StaffRunAction.objects.get().outcome == "not_failed"


def test_cancel_many_cancels_only_the_selected_active_runs_and_audits_each(desk, api, staff):
    first, second, untouched = queued_run(api, "m-1"), queued_run(api, "m-2"), queued_run(api, "m-3")
    done = queued_run(api, "m-4")
    Run.objects.filter(id=done.id).update(state=RunState.COMPLETED)

    page = act(desk, "cancel_selected", [first, second, done]).content.decode()

    assert "1 already finished, 2 cancelled" in page
    states = dict(Run.objects.values_list("id", "state"))
    assert (states[first.id], states[second.id]) == (RunState.CANCELLED, RunState.CANCELLED)
    assert (states[untouched.id], states[done.id]) == (RunState.QUEUED, RunState.COMPLETED)
    audits = {audit.run_id: audit for audit in StaffRunAction.objects.all()}
    assert {run_id: audit.outcome for run_id, audit in audits.items()} == {
        first.id: "cancelled",
        second.id: "cancelled",
        done.id: "already_finished",
    }
    assert {(audit.actor, audit.kind) for audit in audits.values()} == {(staff, "cancel")}
    assert len({audit.batch for audit in audits.values()}) == 1
    assert api.get(f"/api/v1/submissions/{first.submission_id}").json()["status"] == "cancelled"


def test_the_audit_is_read_only_in_the_admin(desk, api):
    act(desk, "cancel_selected", [queued_run(api, "m-1")])
    audit = StaffRunAction.objects.get()

    assert desk.get("/admin/runtime/staffrunaction/").status_code == 200
    assert desk.get("/admin/runtime/staffrunaction/add/").status_code == 403
    assert 'name="_save"' not in desk.get(f"/admin/runtime/staffrunaction/{audit.id}/change/").content.decode()
    assert desk.post(f"/admin/runtime/staffrunaction/{audit.id}/delete/").status_code == 403


@pytest.mark.django_db
def test_neither_users_nor_view_only_staff_can_retry_or_cancel(api):
    run = failed(queued_run(api, "m-1"))
    active = queued_run(api, "m-2")
    person = Client()
    person.force_login(UserFactory(username="not-staff"))
    viewer = UserFactory(username="desk-viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    viewing = Client()
    viewing.force_login(viewer)

    for client in (person, viewing):
        act(client, "retry_failed", [run])
        act(client, "cancel_selected", [active])
        client.post(f"{RUNS}{run.id}/desk/retry/")

    assert Run.objects.get(id=run.id).state == RunState.FAILED
    assert Run.objects.get(id=active.id).state == RunState.QUEUED
    assert not StaffRunAction.objects.exists()
