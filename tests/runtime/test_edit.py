"""Edit (`POST /api/v1/messages/{id}/edit`): a new version of the last exchange's user message, answered in a fresh
provider session seeded with the turns before it, the edited version and its reply kept as an earlier branch
(docs/api.md "Edit")."""

import json
import uuid

from runtime import selectors
from runtime.models import Event, EventType, Message, Run, RunState, Submission
from tests.attachments.files import png, upload
from tests.client import finished_run, history, post, post_message, run_in_state, start_task
from tests.concurrency import all_at_once
from tests.conftest import bearer_client
from tests.runtime.test_regenerate import regenerate, replied, reply_of, session_items


def edit(client, message_id, text: str = "beta, edited", client_message_id: str = "e-1", **fields):
    return post(
        client, f"/api/v1/messages/{message_id}/edit", {"clientMessageId": client_message_id, "text": text, **fields}
    )


def asked_of(run: Run) -> str:
    return str(run.submission.user_message_id)


def test_an_edit_is_answered_in_a_fresh_session_that_never_saw_the_old_words(workers, api, rebyte_double):
    replied(api, "alpha", "m-1")
    edited = replied(api, "beta", "m-2")

    response = edit(api, asked_of(edited))

    assert response.status_code == 202, response.content
    receipt = response.json()
    assert (receipt["previousVersionId"], receipt["version"]) == (asked_of(edited), 2)
    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    requests = rebyte_double.requests()
    creates = [index for index, request in enumerate(requests) if request["op"] == "create_session"]
    assert len(creates) == 2  # the edit's input opened a session of its own
    since_the_edit = [json.dumps(request["body"]) for request in requests[creates[1] :]]
    assert "beta, edited" in since_the_edit[0]
    assert not any('"beta"' in body or "User: beta\\n" in body for body in since_the_edit)
    first_session, fresh = rebyte_double.state()["sessions"]
    assert len(session_items(first_session)) == 4  # the first session got nothing more
    (input_role, input_text), (reply_role, reply_text) = session_items(fresh)
    assert (input_role, reply_role) == ("user", "assistant")
    assert "User: alpha\nAssistant: Echo: alpha" in input_text  # the carry of the turns before the edited message
    assert input_text.endswith("beta, edited")
    assert "User: beta\n" not in input_text
    assert reply_text == "Echo: beta, edited"


def test_history_keeps_both_versions_each_with_its_own_reply(workers, api):
    edited = replied(api, "beta", "m-1")
    receipt = edit(api, asked_of(edited)).json()
    finished_run(receipt["submissionId"])

    messages = history(api)["messages"]

    both = [asked_of(edited), receipt["messageId"]]
    assert [(m["role"], m["text"], m["version"], m["replyTo"]) for m in messages] == [
        ("user", "beta", 1, None),
        ("assistant", "Echo: beta", None, both[0]),
        ("user", "beta, edited", 2, None),
        ("assistant", "Echo: beta, edited", None, both[1]),
    ]
    assert [m["versionIds"] for m in messages] == [both, [], both, []]
    assert messages[3]["id"] == receipt["replyMessageId"]


def test_the_conversation_goes_on_from_the_edited_branch_only(workers, api, rebyte_double):
    edited = replied(api, "beta", "m-1")
    finished_run(edit(api, asked_of(edited)).json()["submissionId"])

    later = replied(api, "gamma", "m-2")

    first_session, fresh = rebyte_double.state()["sessions"]
    assert len(session_items(first_session)) == 2
    assert [role for role, _ in session_items(fresh)] == ["user", "assistant"] * 2
    assert session_items(fresh)[-1] == ("assistant", "Echo: gamma")
    # A session opened later (a rotation) carries the current branch's turns, never the earlier version's.
    after_gamma = later.submission.assistant_message.sequence + 1
    assert selectors.carry_of(later.submission.conversation_id, after_gamma) == (
        "User: beta, edited\nAssistant: Echo: beta, edited\n\nUser: gamma\nAssistant: Echo: gamma"
    )


def test_an_edit_and_a_regeneration_of_it_keep_to_the_current_version(workers, api, rebyte_double):
    edited = replied(api, "beta", "m-1")
    version = finished_run(edit(api, asked_of(edited)).json()["submissionId"])

    receipt = regenerate(api, reply_of(version)).json()

    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    *_, latest = rebyte_double.state()["sessions"]
    assert session_items(latest)[0][1] == "beta, edited"
    messages = history(api)["messages"]
    assert [m["attempt"] for m in messages if m["role"] == "assistant"] == [1, 1, 2]


def test_an_earlier_version_of_the_last_message_can_be_edited_again(workers, api):
    edited = replied(api, "beta", "m-1")
    finished_run(edit(api, asked_of(edited)).json()["submissionId"])

    response = edit(api, asked_of(edited), "beta, once more", "e-2")

    assert response.status_code == 202, response.content
    assert response.json()["version"] == 3
    finished_run(response.json()["submissionId"])
    assert [m["version"] for m in history(api)["messages"] if m["role"] == "user"] == [1, 2, 3]


def test_a_failed_reply_to_a_message_edited_since_is_not_tried_again(workers, api):
    edited = replied(api, "/fail", "m-1")
    version = finished_run(edit(api, asked_of(edited), "/fail again").json()["submissionId"])
    assert (edited.state, version.state) == (RunState.FAILED, RunState.FAILED)

    old = post(api, f"/api/v1/submissions/{edited.submission_id}/retry", {"clientRetryId": str(uuid.uuid4())})
    new = post(api, f"/api/v1/submissions/{version.submission_id}/retry", {"clientRetryId": str(uuid.uuid4())})

    assert (old.status_code, old.json()["error"]["code"]) == (409, "not_retryable")
    assert new.status_code == 202


def test_a_tasks_last_message_is_edited_in_its_own_conversation(workers, api):
    task = start_task(api, "plan the trip", client_message_id="t-1")
    edited = finished_run(task["submissionId"])

    receipt = edit(api, asked_of(edited), "plan the walk").json()

    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    page = history(api, task_id=task["taskId"])
    assert [m["text"] for m in page["messages"]][-1] == "Echo: plan the walk"


def test_the_same_client_message_id_again_is_a_replay_with_the_first_receipt(workers, api):
    edited = replied(api, "beta", "m-1")
    first = edit(api, asked_of(edited))
    finished_run(first.json()["submissionId"])

    again = edit(api, asked_of(edited))

    assert (again.status_code, again.json()) == (202, first.json())
    assert Submission.objects.count() == 2
    assert Message.objects.filter(text="beta, edited").count() == 1


def test_a_client_message_id_reused_with_other_words_is_a_conflict(workers, api):
    edited = replied(api, "beta", "m-1")
    finished_run(edit(api, asked_of(edited)).json()["submissionId"])

    response = edit(api, asked_of(edited), "other words")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"


def test_another_users_message_is_not_found(workers, api, other_api):
    edited = replied(api, "beta", "m-1")

    response = edit(other_api, asked_of(edited))

    assert response.status_code == 404
    assert response.json()["error"] == {"code": "not_found", "message": "No such message.", "retryable": False}
    assert Submission.objects.count() == 1


def test_a_reply_is_not_a_user_message(workers, api):
    edited = replied(api, "beta", "m-1")

    assert edit(api, reply_of(edited)).status_code == 404


def test_only_the_last_exchanges_message_is_edited(workers, api):
    earlier = replied(api, "alpha", "m-1")
    replied(api, "beta", "m-2")

    response = edit(api, asked_of(earlier))

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "edit_not_last"
    assert Submission.objects.count() == 2


def test_a_message_whose_reply_is_still_running_is_not_edited(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=50, delta_chunks=4)
    receipt = post_message(api, "/slow a long answer", client_message_id="m-1")
    run_in_state(receipt["submissionId"], RunState.RUNNING)

    response = edit(api, receipt["messageId"])

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "run_in_progress"
    assert response.json()["error"]["activeSubmissionId"] == receipt["submissionId"]
    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED  # the reply went on untouched
    assert edit(api, receipt["messageId"]).status_code == 202  # and once it has ended, the edit is admitted


def test_edits_of_one_message_racing_admit_one_new_version(workers, user):
    edited = replied(bearer_client(user), "beta", "m-1")
    clients = [bearer_client(user) for _ in range(4)]

    responses = all_at_once(4, lambda index: edit(clients[index], asked_of(edited), f"take {index}", f"e-{index}"))

    assert sorted(response.status_code for response in responses) == [202, 409, 409, 409]
    assert Message.objects.filter(first_version_id=asked_of(edited)).count() == 1


def test_bad_requests_are_refused_without_a_trace(api):
    message_id = post_message(api, "beta")["messageId"]
    path = f"/api/v1/messages/{message_id}/edit"

    answers = [
        post(api, path, {"clientMessageId": "e-1"}),
        post(api, path, {"clientMessageId": "e-1", "text": "   "}),
        post(api, path, {"clientMessageId": "e-1", "text": "x", "messagePolicy": "interrupt"}),
        post(api, path, {"clientMessageId": "e-1", "text": "x", "attachmentIds": [str(uuid.uuid4())]}),
        post(api, path, {"text": "x"}),
        post(api, "/api/v1/messages/not-a-uuid/edit", {"clientMessageId": "e-1", "text": "x"}),
    ]

    assert [answer.status_code for answer in answers] == [400] * 6
    assert {answer.json()["error"]["code"] for answer in answers} == {"invalid_request"}
    assert Submission.objects.count() == 1


def test_an_edit_keeps_the_files_of_the_version_it_edits(workers, api, rebyte_double):
    photo = upload(api, png(40, 30), "photo.png", "image/png").json()
    edited = finished_run(post_message(api, "what is this?", attachmentIds=[photo["id"]])["submissionId"])

    receipt = edit(api, asked_of(edited), "what colour is this?").json()

    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    first, _, second, reply = history(api)["messages"]
    assert second["parts"] == first["parts"] and len(first["parts"]) == 1
    # The reply's stream opens with them too, as a first message's does (its `submission.accepted` carries them).
    accepted = Event.objects.get(submission_id=receipt["submissionId"], type=EventType.SUBMISSION_ACCEPTED)
    assert accepted.payload["userMessage"]["parts"] == first["parts"]
    assert reply["text"] == "Echo: what colour is this? [image 40x30 png]"  # the double saw the image again
