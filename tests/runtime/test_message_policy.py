"""A message sent while a reply is unfinished: `queue` (default), `interrupt` or `reject`, per conversation or per
message (docs/api.md "Messages during a reply")."""

import pytest

from devtools.stack import wait_until
from runtime.models import Event, EventType, Run, RunState, Submission
from tests.client import finished_run, send_message
from tests.concurrency import all_at_once
from tests.conftest import bearer_client


def set_policy(api, policy, url="/api/v1/conversation"):
    return api.patch(url, {"messagePolicy": policy}, format="json")


def state_of(submission_id) -> str:
    return Run.objects.get(submission_id=submission_id).state


def streaming(submission_id) -> None:
    wait_until(
        lambda: Event.objects.filter(submission_id=submission_id, type=EventType.TEXT_DELTA).exists(),
        timeout=60,
        what="the reply to start streaming",
    )


@pytest.mark.django_db
def test_the_conversation_policy_is_set_by_patch_and_shown_with_the_history(api):
    response = set_policy(api, "reject")

    assert response.status_code == 200
    assert response.json()["messagePolicy"] == "reject"
    page = api.get("/api/v1/conversation").json()
    assert page["messagePolicy"] == "reject"
    assert response.json()["conversationId"] == page["conversationId"]


@pytest.mark.django_db
def test_an_unknown_policy_is_an_invalid_request(api):
    response = set_policy(api, "shout")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert api.get("/api/v1/conversation").json()["messagePolicy"] == "queue"


@pytest.mark.django_db
def test_a_task_takes_its_policy_at_creation_and_by_patch(api, other_api):
    task = api.post(
        "/api/v1/tasks", {"clientMessageId": "t-1", "text": "plan", "messagePolicy": "reject"}, format="json"
    )
    conversation_url = f"/api/v1/tasks/{task.json()['taskId']}/conversation"
    assert api.get(conversation_url).json()["messagePolicy"] == "reject"

    assert set_policy(api, "interrupt", conversation_url).json()["messagePolicy"] == "interrupt"
    assert api.get(conversation_url).json()["messagePolicy"] == "interrupt"
    assert set_policy(other_api, "queue", conversation_url).status_code == 404


@pytest.mark.django_db
def test_queue_is_the_default_and_admits_behind_the_unfinished_run(api):
    first = send_message(api, client_message_id="m-1").json()

    second = send_message(api, client_message_id="m-2")

    assert second.status_code == 202
    assert [state_of(first["submissionId"]), state_of(second.json()["submissionId"])] == ["queued", "queued"]


@pytest.mark.django_db
def test_reject_answers_409_with_the_active_submission_and_admits_nothing(api):
    first = send_message(api, client_message_id="m-1").json()
    set_policy(api, "reject")

    response = send_message(api, client_message_id="m-2")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "run_in_progress"
    assert error["retryable"] is True
    assert error["activeSubmissionId"] == first["submissionId"]
    assert response.json()["requestId"] == response["X-Request-Id"]
    assert list(Submission.objects.values_list("client_message_id", flat=True)) == ["m-1"]
    assert Event.objects.count() == 1


@pytest.mark.django_db
def test_a_message_may_reject_itself_in_a_queueing_conversation(api):
    first = send_message(api, client_message_id="m-1").json()

    response = send_message(api, client_message_id="m-2", messagePolicy="reject")

    assert response.status_code == 409
    assert response.json()["error"]["activeSubmissionId"] == first["submissionId"]


@pytest.mark.django_db
def test_reject_admits_a_message_once_nothing_is_unfinished(api):
    first = send_message(api, client_message_id="m-1").json()
    api.post(f"/api/v1/submissions/{first['submissionId']}/cancel", {}, format="json")
    set_policy(api, "reject")

    assert send_message(api, client_message_id="m-2").status_code == 202


@pytest.mark.django_db
def test_a_replay_gets_its_original_receipt_whatever_the_policy(api):
    first = send_message(api, client_message_id="m-1")
    set_policy(api, "reject")

    rejected_replay = send_message(api, client_message_id="m-1")
    interrupting_replay = send_message(api, client_message_id="m-1", messagePolicy="interrupt")

    assert (rejected_replay.status_code, rejected_replay.json()) == (202, first.json())
    assert (interrupting_replay.status_code, interrupting_replay.json()) == (202, first.json())
    assert state_of(first.json()["submissionId"]) == RunState.QUEUED  # the replay cancelled nothing


@pytest.mark.django_db
def test_interrupt_cancels_a_queued_run_on_the_spot_and_queues_the_new_message(api):
    first = send_message(api, client_message_id="m-1").json()
    set_policy(api, "interrupt")

    second = send_message(api, client_message_id="m-2")

    assert second.status_code == 202
    assert state_of(first["submissionId"]) == RunState.CANCELLED
    assert state_of(second.json()["submissionId"]) == RunState.QUEUED
    # The cancel and the admission are one transaction: their events are consecutive.
    assert list(Event.objects.order_by("seq").values_list("type", flat=True)) == [
        "submission.accepted",
        "run.cancelled",
        "submission.accepted",
    ]


@pytest.mark.django_db(transaction=True)
def test_concurrent_messages_under_reject_admit_exactly_one(user):
    set_policy(bearer_client(user), "reject")
    senders = 6
    clients = [bearer_client(user) for _ in range(senders)]

    statuses = all_at_once(
        senders, lambda index: send_message(clients[index], client_message_id=f"race-{index}").status_code
    )

    assert sorted(statuses) == [202] + [409] * (senders - 1)
    assert Submission.objects.count() == 1


def test_interrupt_cancels_the_streaming_reply_and_then_runs_the_new_message(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=200)
    first = send_message(api, "/slow a reply that will be interrupted", client_message_id="m-1").json()
    streaming(first["submissionId"])

    second = send_message(api, "the new question", client_message_id="m-2", messagePolicy="interrupt")

    assert second.status_code == 202
    interrupted = finished_run(first["submissionId"])
    assert interrupted.state == RunState.CANCELLED
    assert interrupted.submission.assistant_message.status == "cancelled"
    answered = finished_run(second.json()["submissionId"])
    assert answered.state == RunState.COMPLETED
    assert answered.submission.assistant_message.text == "Echo: the new question"
    state = rebyte_double.state()
    cancels = [event for event in state["input_events"] if event["type"] == "agent.session.input.cancel"]
    assert [event["idempotency_key"] for event in cancels] == [f"impo-cancel-{interrupted.id}"]
    # The second turn may run in a fresh session (rotation follows its own rules); each turn ran once.
    assert [turn["status"] for session in state["sessions"] for turn in session["turns"]] == ["cancelled", "completed"]


def test_reject_while_a_reply_streams_answers_409_and_the_reply_goes_on(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=20)
    set_policy(api, "reject")
    first = send_message(api, "/slow a reply that keeps its place", client_message_id="m-1").json()
    streaming(first["submissionId"])

    response = send_message(api, "too early", client_message_id="m-2")

    assert response.status_code == 409
    assert response.json()["error"]["activeSubmissionId"] == first["submissionId"]
    assert finished_run(first["submissionId"]).state == RunState.COMPLETED
    assert not Submission.objects.filter(client_message_id="m-2").exists()
    assert send_message(api, "in time", client_message_id="m-2").status_code == 202
