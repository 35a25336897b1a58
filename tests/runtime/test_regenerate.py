"""Regenerate (`POST /api/v1/messages/{id}/regenerate`): a new attempt at the last reply, in a fresh provider session
that never saw the reply it replaces, the replaced reply kept as an earlier attempt (docs/api.md "Regenerate")."""

import uuid

from runtime.execution import retries
from runtime.models import Run, RunState, StaffRunActionOutcome, Submission
from tests.client import finished_run, history, post, post_message, start_task, token_of
from tests.concurrency import all_at_once
from tests.conftest import bearer_client
from tests.realtime.test_submission_stream import assert_well_formed, read_stream, text_of


def regenerate(client, message_id, client_message_id: str = "r-1", **fields):
    return post(client, f"/api/v1/messages/{message_id}/regenerate", {"clientMessageId": client_message_id, **fields})


def replied(client, text: str, client_message_id: str) -> Run:
    return finished_run(post_message(client, text, client_message_id=client_message_id)["submissionId"])


def reply_of(run: Run) -> str:
    return str(run.submission.assistant_message_id)


def session_items(session: dict) -> list[tuple[str, str]]:
    """A double's session as what it holds: (role, text) of each message item, in order."""
    return [
        (item["role"], "".join(part.get("text", "") for part in item["content"]))
        for item in session["items"]
        if item["type"] == "message"
    ]


def test_a_regenerated_reply_runs_in_a_fresh_session_that_never_saw_the_replaced_one(workers, api, rebyte_double):
    replied(api, "alpha", "m-1")
    replaced = replied(api, "beta", "m-2")

    response = regenerate(api, reply_of(replaced))

    assert response.status_code == 202, response.content
    receipt = response.json()
    assert (receipt["replacedMessageId"], receipt["attempt"]) == (reply_of(replaced), 2)
    assert receipt["userMessageId"] == str(replaced.submission.user_message_id)
    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    first_session, fresh = rebyte_double.state()["sessions"]
    assert [role for role, _ in session_items(first_session)] == ["user", "assistant"] * 2
    # What the provider holds for the new attempt: the earlier turn as carried context and the user's words, no reply
    # of the replaced attempt; then its own reply.
    (input_role, input_text), (reply_role, reply_text) = session_items(fresh)
    assert (input_role, reply_role) == ("user", "assistant")
    assert "User: alpha\nAssistant: Echo: alpha" in input_text
    assert input_text.endswith("beta")
    assert "Echo: beta" not in input_text
    assert reply_text == "Echo: beta"


def test_the_reply_named_by_a_message_receipt_is_the_one_regenerate_takes(workers, api):
    receipt = post_message(api, "beta", client_message_id="m-1")
    finished_run(receipt["submissionId"])

    response = regenerate(api, receipt["replyMessageId"])

    assert response.status_code == 202, response.content
    assert response.json()["replacedMessageId"] == receipt["replyMessageId"]
    assert response.json()["replyMessageId"] == response.json()["messageId"]


def test_history_keeps_both_versions_of_a_regenerated_reply(workers, api):
    user_message_id = post_message(api, "beta", client_message_id="m-1")["messageId"]
    replaced = finished_run(Submission.objects.get(client_message_id="m-1").id)
    receipt = regenerate(api, reply_of(replaced)).json()
    finished_run(receipt["submissionId"])

    messages = history(api)["messages"]

    assert [(m["role"], m["attempt"], m["replyTo"]) for m in messages] == [
        ("user", None, None),
        ("assistant", 1, user_message_id),
        ("assistant", 2, user_message_id),
    ]
    both = [reply_of(replaced), receipt["messageId"]]
    assert [m["attemptIds"] for m in messages] == [[], both, both]
    assert [m["text"] for m in messages[1:]] == ["Echo: beta", "Echo: beta"]
    assert [m["submissionId"] for m in messages[1:]] == [str(replaced.submission_id), receipt["submissionId"]]


def test_the_next_message_goes_on_in_the_regenerated_session(workers, api, rebyte_double):
    replaced = replied(api, "beta", "m-1")
    finished_run(regenerate(api, reply_of(replaced)).json()["submissionId"])

    replied(api, "gamma", "m-2")

    first_session, fresh = rebyte_double.state()["sessions"]
    assert [role for role, _ in session_items(fresh)] == ["user", "assistant"] * 2
    assert session_items(fresh)[-1] == ("assistant", "Echo: gamma")
    assert len(session_items(first_session)) == 2  # the replaced attempt's session got nothing more


def test_a_tasks_last_reply_is_regenerated_in_its_own_conversation(workers, api):
    task = start_task(api, "plan the trip", client_message_id="t-1")
    replaced = finished_run(task["submissionId"])

    receipt = regenerate(api, reply_of(replaced)).json()

    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    page = history(api, task_id=task["taskId"])
    assert [m["attempt"] for m in page["messages"]] == [None, 1, 2]
    assert page["messages"][-1]["text"] == "Echo: plan the trip"


def test_the_same_client_message_id_again_is_a_replay_with_the_original_receipt(workers, api):
    replaced = replied(api, "beta", "m-1")
    first = regenerate(api, reply_of(replaced))
    finished_run(first.json()["submissionId"])

    again = regenerate(api, reply_of(replaced))

    assert (again.status_code, again.json()) == (202, first.json())
    assert Submission.objects.count() == 2


def test_a_client_message_id_reused_for_another_reply_is_a_conflict(workers, api):
    replaced = replied(api, "beta", "m-1")

    response = regenerate(api, reply_of(replaced), client_message_id="m-1")  # the message's own id

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"


def test_another_users_reply_is_not_found(workers, api, other_api):
    replaced = replied(api, "beta", "m-1")

    response = regenerate(other_api, reply_of(replaced))

    assert response.status_code == 404
    assert response.json()["error"] == {"code": "not_found", "message": "No such reply.", "retryable": False}
    assert "requestId" in response.json()
    assert Submission.objects.count() == 1


def test_a_reply_of_a_deleted_task_is_not_found(workers, api):
    task = start_task(api, "beta", client_message_id="t-1")
    replaced = finished_run(task["submissionId"])
    assert api.delete(f"/api/v1/tasks/{task['taskId']}").status_code == 202

    response = regenerate(api, reply_of(replaced))

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert not Submission.objects.filter(client_message_id="r-1").exists()


def test_only_the_last_reply_is_regenerated(workers, api):
    earlier = replied(api, "alpha", "m-1")
    replied(api, "beta", "m-2")

    response = regenerate(api, reply_of(earlier))

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_regenerable"


def test_a_replaced_reply_is_not_regenerated_again(workers, api):
    replaced = replied(api, "beta", "m-1")
    finished_run(regenerate(api, reply_of(replaced)).json()["submissionId"])

    response = regenerate(api, reply_of(replaced), client_message_id="r-2")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_regenerable"


def test_a_reply_still_running_is_not_regenerated(api):
    receipt = post_message(api, "beta", client_message_id="m-1")  # no worker: its run stays queued
    reply = Submission.objects.get(id=receipt["submissionId"]).assistant_message_id

    response = regenerate(api, reply)

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "run_in_progress"
    assert response.json()["error"]["activeSubmissionId"] == receipt["submissionId"]


def test_a_user_message_is_not_a_reply(api):
    receipt = post_message(api, "beta", client_message_id="m-1")

    response = regenerate(api, receipt["messageId"])

    assert response.status_code == 404


def test_bad_requests_are_refused_without_a_trace(api):
    reply = Submission.objects.get(id=post_message(api, "beta")["submissionId"]).assistant_message_id
    path = f"/api/v1/messages/{reply}/regenerate"

    answers = [
        post(api, path, {}),
        post(api, path, {"clientMessageId": "r-1", "text": "no words of its own"}),
        post(api, path, {"clientMessageId": ""}),
        post(api, path, {"clientMessageId": "r-1", "deviceId": "not a uuid"}),
        post(api, "/api/v1/messages/not-a-uuid/regenerate", {"clientMessageId": "r-1"}),
    ]

    assert [answer.status_code for answer in answers] == [400, 400, 400, 400, 400]
    assert {answer.json()["error"]["code"] for answer in answers} == {"invalid_request"}
    assert Submission.objects.count() == 1


def test_a_regenerated_failure_is_tried_again_on_its_latest_version_only(workers, api):
    replaced = replied(api, "/fail", "m-1")
    latest = finished_run(regenerate(api, reply_of(replaced)).json()["submissionId"])
    assert (replaced.state, latest.state) == (RunState.FAILED, RunState.FAILED)

    old = post(api, f"/api/v1/submissions/{replaced.submission_id}/retry", {"clientRetryId": str(uuid.uuid4())})
    new = post(api, f"/api/v1/submissions/{latest.submission_id}/retry", {"clientRetryId": str(uuid.uuid4())})

    assert (old.status_code, old.json()["error"]["code"]) == (409, "not_retryable")
    assert new.status_code == 202


def test_staff_do_not_retry_a_replaced_failure_either(workers, api, staff):
    replaced = replied(api, "/fail", "m-1")
    finished_run(regenerate(api, reply_of(replaced)).json()["submissionId"])

    outcome = retries.staff_retry_failed_run(replaced.id, actor=staff, batch=uuid.uuid4())

    assert outcome == StaffRunActionOutcome.REPLACED
    replaced.refresh_from_db()
    assert (replaced.state, replaced.retries) == (RunState.FAILED, 0)


def test_the_new_attempt_streams_as_its_own_reply(workers, shared_web, api, user):
    replaced = replied(api, "beta", "m-1")
    receipt = regenerate(api, reply_of(replaced)).json()
    finished_run(receipt["submissionId"])

    _, items = read_stream(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))

    assert_well_formed(items)
    assert items[0]["messageId"] == receipt["messageId"]
    assert text_of(items) == "Echo: beta"


def test_regenerations_of_one_reply_racing_admit_one_new_attempt(workers, user):
    replaced = replied(bearer_client(user), "beta", "m-1")
    clients = [bearer_client(user) for _ in range(4)]

    responses = all_at_once(4, lambda index: regenerate(clients[index], reply_of(replaced), f"r-{index}"))

    assert sorted(response.status_code for response in responses) == [202, 409, 409, 409]
    assert Submission.objects.filter(user_message_id=replaced.submission.user_message_id).count() == 2


def test_one_regeneration_sent_many_times_at_once_gets_one_receipt(workers, user):
    replaced = replied(bearer_client(user), "beta", "m-1")
    clients = [bearer_client(user) for _ in range(4)]

    responses = all_at_once(4, lambda index: regenerate(clients[index], reply_of(replaced), "r-1"))

    assert [response.status_code for response in responses] == [202] * 4
    assert len({response.json()["submissionId"] for response in responses}) == 1
    assert Submission.objects.count() == 2
