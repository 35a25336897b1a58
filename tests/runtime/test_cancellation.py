import pytest

from devtools.stack import wait_until
from rebyte.models import RemoteTurn
from runtime.models import Run, RunState
from tests.client import post_message


def cancel(api, submission_id, body=None):
    return api.post(f"/api/v1/submissions/{submission_id}/cancel", body if body is not None else {}, format="json")


@pytest.mark.django_db
def test_a_queued_run_is_cancelled_without_contacting_the_provider(api, rebyte_double):
    receipt = post_message(api)

    response = cancel(api, receipt["submissionId"])

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["cancelRequested"] is True
    assert Run.objects.get(submission_id=receipt["submissionId"]).state == RunState.CANCELLED
    assert rebyte_double.state()["counts"]["turns"] == 0


@pytest.mark.django_db
def test_repeating_a_cancel_is_harmless(api):
    receipt = post_message(api)
    first = cancel(api, receipt["submissionId"]).json()

    second = cancel(api, receipt["submissionId"])

    assert second.status_code == 200
    assert second.json()["status"] == "cancelled"
    assert second.json()["version"] == first["version"]


@pytest.mark.django_db
def test_cancelling_another_users_submission_is_not_found(api, other_api):
    receipt = post_message(other_api)

    response = cancel(api, receipt["submissionId"])

    assert response.status_code == 404
    assert Run.objects.get(submission_id=receipt["submissionId"]).state == RunState.QUEUED


@pytest.mark.django_db
def test_a_cancel_with_a_body_is_an_invalid_request(api):
    receipt = post_message(api)

    response = cancel(api, receipt["submissionId"], {"reason": "bored"})

    assert response.status_code == 400
    assert Run.objects.get(submission_id=receipt["submissionId"]).state == RunState.QUEUED


def test_cancelling_while_streaming_stops_the_remote_turn(workers, api, rebyte_double):
    first = post_message(api, "warm up", client_message_id="m-0")
    wait_until(
        lambda: Run.objects.filter(submission_id=first["submissionId"], state="completed").exists(),
        timeout=30,
        what="the first reply",
    )
    rebyte_double.configure(delta_delay_ms=500, delta_chunks=10)
    receipt = post_message(api, "a long answer please")
    wait_until(
        lambda: RemoteTurn.objects.filter(run__submission_id=receipt["submissionId"]).exclude(turn_id="").exists(),
        timeout=30,
        what="the remote turn",
    )

    assert cancel(api, receipt["submissionId"]).status_code == 200

    run = wait_until(
        lambda: (
            Run.objects.filter(submission_id=receipt["submissionId"], state__in=["cancelled", "completed"])
            .select_related("submission__assistant_message")
            .first()
        ),
        timeout=30,
        what="the cancelled run",
    )
    assert run.state == RunState.CANCELLED
    assert run.submission.assistant_message.status == "cancelled"
    state = rebyte_double.state()
    (session,) = state["sessions"]
    assert [turn["status"] for turn in session["turns"]] == ["completed", "cancelled"]
    cancels = [event for event in state["input_events"] if event["type"] == "agent.session.input.cancel"]
    assert [event["idempotency_key"] for event in cancels] == [f"impo-cancel-{run.id}"]


def test_cancelling_after_completion_leaves_the_run_completed(workers, api):
    receipt = post_message(api, "quick")
    wait_until(
        lambda: Run.objects.filter(submission_id=receipt["submissionId"], state="completed").exists(),
        timeout=30,
        what="completion",
    )

    response = cancel(api, receipt["submissionId"])

    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    assert response.json()["cancelRequested"] is False
