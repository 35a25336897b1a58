"""Deleting a Task's conversation and clearing Main Chat, through the API with real workers and the double: a 404
everywhere at once, runs cancelled first, remote sessions deleted under durable intents (a 5xx retried, a lost
answer settled by reading, never repeated blindly), local rows gone once nothing remote is pending."""

import json

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from devtools.stack import wait_until
from rebyte.models import DeletionIntent, RemoteSession
from runtime.models import Conversation, Event, Message, Run, RunState, Submission, Task
from runtime.realtime.consumers import CONVERSATION_DELETED_CLOSE_CODE
from tests.client import get, post_message, socket_url, start_task, token_of, web_client


def delete_task(client, task_id):
    return client.delete(f"/api/v1/tasks/{task_id}")


def settled(submission_id):
    return wait_until(
        lambda: (
            Run.objects.filter(submission_id=submission_id, state__in=sorted(RunState.values))
            .exclude(state__in=["queued", "running", "waiting_device", "waiting_approval"])
            .first()
        ),
        timeout=30,
        what="the run to settle",
    )


def purged(conversation_id):
    return wait_until(
        lambda: Conversation.objects.filter(id=conversation_id, purged_at__isnull=False).exists(),
        timeout=60,
        what="the deleted conversation's rows to go",
    )


def remote_session_ids(double) -> set[str]:
    return {session["id"] for session in double.state()["sessions"]}


def a_settled_task(api):
    receipt = start_task(api, "plan a trip")
    assert settled(receipt["submissionId"]).state == RunState.COMPLETED
    return receipt


def a_task_streaming(api, rebyte_double):
    """A task whose slow reply (the double paced) has begun streaming."""
    rebyte_double.configure(delta_delay_ms=400, delta_chunks=30)
    receipt = start_task(api, "a long answer please")
    wait_until(
        lambda: Event.objects.filter(submission_id=receipt["submissionId"], type="text.delta").exists(),
        timeout=30,
        what="the reply to stream",
    )
    return receipt


def assert_rows_gone(conversation_id):
    assert not Message.objects.filter(conversation_id=conversation_id).exists()
    assert not Submission.objects.filter(conversation_id=conversation_id).exists()
    assert not Event.objects.filter(conversation_id=conversation_id).exists()
    assert not RemoteSession.objects.filter(conversation_id=conversation_id).exists()


def test_a_deleted_task_is_404_at_once_and_its_remote_session_and_rows_go(workers, api, rebyte_double):
    receipt = a_settled_task(api)
    task_id, conversation_id = receipt["taskId"], receipt["conversationId"]
    (session_id,) = remote_session_ids(rebyte_double)

    response = delete_task(api, task_id)

    assert response.status_code == 202
    assert response.json() == {"deleted": True}
    assert get(api, f"/api/v1/tasks/{task_id}/conversation").status_code == 404
    assert get(api, f"/api/v1/conversations/{conversation_id}").status_code == 404
    assert get(api, f"/api/v1/submissions/{receipt['submissionId']}").status_code == 404
    assert task_id not in [task["taskId"] for task in get(api, "/api/v1/tasks").json()["tasks"]]
    listed = get(api, "/api/v1/conversations").json()["conversations"]
    assert conversation_id not in [chat["conversationId"] for chat in listed]
    assert post_message(api, "more", client_message_id="m-2", task_id=None)  # Main Chat is untouched
    refused = api.post(f"/api/v1/tasks/{task_id}/messages", {"clientMessageId": "m-3", "text": "x"}, format="json")
    assert refused.status_code == 404

    purged(conversation_id)
    assert session_id not in remote_session_ids(rebyte_double)
    assert_rows_gone(conversation_id)
    intent = DeletionIntent.objects.get(remote_id=session_id)
    assert (intent.state, intent.outcome, intent.attempts) == ("done", "deleted", 1)


def test_deleting_again_is_answered_the_same_and_changes_nothing(workers, api, rebyte_double):
    receipt = a_settled_task(api)

    assert delete_task(api, receipt["taskId"]).status_code == 202
    assert delete_task(api, receipt["taskId"]).status_code == 202
    purged(receipt["conversationId"])
    assert delete_task(api, receipt["taskId"]).status_code == 202

    assert rebyte_double.state()["requests"]["delete_session"] == 1
    assert DeletionIntent.objects.count() == 1


@pytest.mark.django_db
def test_another_users_task_is_not_found_and_stays(api, other_api):
    receipt = start_task(other_api, "theirs")

    response = delete_task(api, receipt["taskId"])

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert Conversation.objects.get(id=receipt["conversationId"]).deleted_at is None
    assert delete_task(api, "8d7e1c1a-1b7f-4a0e-9d2a-3c1e5b7f9a11").status_code == 404


def test_a_run_in_flight_is_cancelled_before_its_session_is_deleted(workers, api, rebyte_double):
    receipt = a_task_streaming(api, rebyte_double)

    assert delete_task(api, receipt["taskId"]).status_code == 202

    purged(receipt["conversationId"])
    state = rebyte_double.state()
    assert state["sessions"] == []
    cancels = [event for event in state["input_events"] if event["type"] == "agent.session.input.cancel"]
    assert len(cancels) == 1
    assert_rows_gone(receipt["conversationId"])


def test_a_5xx_to_the_delete_is_retried_until_the_provider_deletes(workers, api, rebyte_double):
    receipt = a_settled_task(api)
    (session_id,) = remote_session_ids(rebyte_double)
    rebyte_double.fault("delete_session", "http_error", status=503, times=2)

    assert delete_task(api, receipt["taskId"]).status_code == 202

    purged(receipt["conversationId"])
    assert session_id not in remote_session_ids(rebyte_double)
    assert rebyte_double.state()["requests"]["delete_session"] == 3
    intent = DeletionIntent.objects.get(remote_id=session_id)
    assert (intent.state, intent.outcome, intent.attempts) == ("done", "deleted", 3)


def test_a_delete_whose_answer_is_lost_is_settled_by_reading_not_sent_again(workers, api, rebyte_double):
    receipt = a_settled_task(api)
    (session_id,) = remote_session_ids(rebyte_double)
    rebyte_double.fault("delete_session", "drop_response", times=1)

    assert delete_task(api, receipt["taskId"]).status_code == 202

    purged(receipt["conversationId"])
    requests = rebyte_double.state()["requests"]
    assert requests["delete_session"] == 1
    assert requests["get_session"] >= 1
    intent = DeletionIntent.objects.get(remote_id=session_id)
    assert (intent.state, intent.outcome, intent.attempts) == ("done", "gone", 2)


def test_clearing_main_chat_starts_a_new_one_with_a_fresh_session(workers, api, rebyte_double):
    first = post_message(api, "remember the plan")
    settled(first["submissionId"])
    before = get(api, "/api/v1/conversation").json()
    (old_session,) = remote_session_ids(rebyte_double)

    assert api.delete("/api/v1/conversation").status_code == 202
    assert api.delete("/api/v1/conversation").status_code == 202  # nothing left to clear: the same answer

    after = get(api, "/api/v1/conversation").json()
    assert after["conversationId"] != before["conversationId"]
    assert after["messages"] == []
    second = post_message(api, "hello again", client_message_id="m-2")
    assert settled(second["submissionId"]).state == RunState.COMPLETED
    purged(before["conversationId"])
    assert old_session not in remote_session_ids(rebyte_double)
    assert len(remote_session_ids(rebyte_double)) == 1
    assert Task.objects.count() == 0


def test_an_open_socket_is_told_and_closed_with_4404_and_cannot_reconnect(shared_web, user, api):
    receipt = a_settled_task(api)
    token = token_of(user)
    url = socket_url(shared_web, receipt["conversationId"], token)
    socket = connect(url, open_timeout=20, close_timeout=2, legacy=True)
    with web_client(shared_web, token) as client:
        assert client.delete(f"/api/v1/tasks/{receipt['taskId']}").status_code == 202

    frames = []
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            frames.append(json.loads(socket.recv(timeout=10)))
    assert frames[-1]["type"] == "conversation.deleted"
    assert closed.value.rcvd.code == CONVERSATION_DELETED_CLOSE_CODE
    with pytest.raises(InvalidStatus):  # refused before the accept, like any conversation not the user's
        connect(url, open_timeout=20, close_timeout=2)


def test_a_worker_killed_mid_delete_leaves_an_intent_the_next_pass_settles_by_reading(stack, api, rebyte_double):
    worker = stack.start_worker("doomed")
    receipt = a_settled_task(api)
    (session_id,) = remote_session_ids(rebyte_double)
    # The worker's delete reaches the double and waits there; the double deletes after the worker is gone.
    rebyte_double.fault("delete_session", "delay", delay_ms=3000)

    assert delete_task(api, receipt["taskId"]).status_code == 202
    wait_until(
        lambda: DeletionIntent.objects.filter(remote_id=session_id, attempts=1).exists(),
        timeout=30,
        what="the delete's attempt to be recorded",
    )
    wait_until(lambda: rebyte_double.state()["requests"].get("delete_session") == 1, timeout=30, what="the call")
    worker.kill()
    stack.start_worker("successor")
    stack.start_sweeper()

    purged(receipt["conversationId"])
    assert rebyte_double.state()["requests"]["delete_session"] == 1
    intent = DeletionIntent.objects.get(remote_id=session_id)
    assert (intent.state, intent.outcome, intent.attempts) == ("done", "gone", 2)


def test_an_open_stream_of_a_deleted_task_ends_with_an_error_and_no_finish(shared_web, user, api, rebyte_double):
    receipt = a_task_streaming(api, rebyte_double)
    url = f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream"
    headers = {"Authorization": f"Bearer {token_of(user)}"}
    lines = []
    with httpx.stream("GET", url, headers=headers, timeout=60) as response:
        chunks = response.iter_lines()
        lines.append(next(chunks))  # the stream is open and following
        assert delete_task(api, receipt["taskId"]).status_code == 202
        lines.extend(chunks)

    items = [
        json.loads(line[6:]) if line != "data: [DONE]" else "[DONE]" for line in lines if line.startswith("data: ")
    ]
    assert items[-2:] == [{"type": "error", "errorText": "This conversation was deleted."}, "[DONE]"]
    assert {"type": "finish"} not in items
    assert httpx.get(url, headers=headers).status_code == 404


def test_staff_see_a_deletion_still_waiting_on_the_provider_and_its_rows_stay_until_it_is_done(
    workers, api, desk, rebyte_double
):
    receipt = a_settled_task(api)
    (session_id,) = remote_session_ids(rebyte_double)
    rebyte_double.fault("delete_session", "http_error", status=503, times=1000)

    assert delete_task(api, receipt["taskId"]).status_code == 202
    wait_until(
        lambda: DeletionIntent.objects.filter(remote_id=session_id, attempts__gte=2).exists(),
        timeout=30,
        what="the delete to be tried again",
    )

    index = desk.get("/admin/").content.decode()
    assert 'data-desk="deletion_intents">1<' in index
    waiting = desk.get("/admin/rebyte/deletionintent/?waiting=yes").content.decode()
    assert session_id in waiting
    assert session_id not in desk.get("/admin/rebyte/deletionintent/?waiting=no").content.decode()
    assert Message.objects.filter(conversation_id=receipt["conversationId"]).exists()  # nothing local goes yet
    assert get(api, f"/api/v1/tasks/{receipt['taskId']}/conversation").status_code == 404
