"""The owner's "Try again" (`POST /api/v1/submissions/{id}/retry`): staff's retry path, for their own failed run."""

import uuid

import pytest

from runtime.models import Event, EventType, Run, RunState, StaffRunAction
from tests.client import finished_run
from tests.runtime.test_staff_actions_on_runs import failed, queued_run


def retry(client, submission_id, client_retry_id=None):
    body = {"clientRetryId": str(client_retry_id or uuid.uuid4())}
    return client.post(f"/api/v1/submissions/{submission_id}/retry", body, format="json")


def test_a_failed_reply_tried_again_by_its_owner_completes_on_the_same_submission(workers, api, rebyte_double, user):
    finished_run(queued_run(api, "m-0", "warm up").submission_id)
    rebyte_double.fault("input_message", "http_error", status=400)
    run = finished_run(queued_run(api, "m-1", "second try works").submission_id)
    assert run.state == RunState.FAILED

    response = retry(api, run.submission_id)

    assert response.status_code == 202
    assert (response.json()["submissionId"], response.json()["status"]) == (str(run.submission_id), "queued")
    retried = finished_run(run.submission_id)
    assert (retried.id, retried.state, retried.retries) == (run.id, RunState.COMPLETED, 1)
    reply = api.get("/api/v1/conversation").json()["messages"][-1]
    assert (reply["text"], reply["status"]) == ("Echo: second try works", "completed")
    keys = [event["idempotency_key"] for event in rebyte_double.state()["input_events"]]
    assert keys[-1] == f"impo-run-{run.id}-retry-1"  # a new provider input key, as staff's retry sends
    [audit] = StaffRunAction.objects.all()
    assert (audit.actor, audit.kind, audit.outcome) == (user, "retry", "queued_again")


def test_the_same_client_retry_id_again_is_a_replay_that_queues_nothing(api):
    run = failed(queued_run(api, "m-1"))
    client_retry_id = uuid.uuid4()

    first, again = retry(api, run.submission_id, client_retry_id), retry(api, run.submission_id, client_retry_id)

    assert (first.status_code, again.status_code) == (202, 202)
    run.refresh_from_db()
    assert (run.state, run.retries) == (RunState.QUEUED, 1)
    accepted = Event.objects.filter(submission_id=run.submission_id, type=EventType.SUBMISSION_ACCEPTED).count()
    assert accepted == 2  # the admission's and the one retry's
    assert StaffRunAction.objects.count() == 1


@pytest.mark.parametrize("state", [RunState.QUEUED, RunState.COMPLETED, RunState.CANCELLED])
def test_a_run_that_did_not_fail_is_not_retryable(api, state):
    run = queued_run(api, "m-1")
    Run.objects.filter(id=run.id).update(state=state)

    response = retry(api, run.submission_id)

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_retryable"
    run.refresh_from_db()
    assert (run.state, run.retries) == (state, 0)
    assert not StaffRunAction.objects.exists()  # a refusal leaves no audit row


def test_the_owner_cannot_retry_another_users_run(api, other_api):
    run = failed(queued_run(api, "m-1"))

    response = retry(other_api, run.submission_id)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    run.refresh_from_db()
    assert (run.state, run.retries) == (RunState.FAILED, 0)


def test_a_retry_without_a_client_retry_id_is_refused(api):
    run = failed(queued_run(api, "m-1"))

    response = api.post(f"/api/v1/submissions/{run.submission_id}/retry", {}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
