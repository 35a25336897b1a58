import pytest

from runtime.models import Conversation, ConversationKind, Submission, Task

pytestmark = pytest.mark.django_db


def create_task(api, client_message_id="t-1", text="Summarise my week", **extra):
    return api.post("/api/v1/tasks", {"clientMessageId": client_message_id, "text": text, **extra}, format="json")


def test_creating_a_task_returns_its_task_conversation_message_and_submission(api, user):
    response = create_task(api)

    assert response.status_code == 202
    body = response.json()
    task = Task.objects.get(id=body["taskId"])
    assert task.owner == user
    assert str(task.conversation_id) == body["conversationId"]
    assert task.conversation.kind == ConversationKind.TASK
    assert task.title == "Summarise my week"
    submission = Submission.objects.get(id=body["submissionId"])
    assert str(submission.user_message_id) == body["messageId"]
    assert submission.conversation_id == task.conversation_id


def test_a_replayed_task_creation_returns_the_original_task(api):
    first = create_task(api)
    second = create_task(api)

    assert second.status_code == 202
    assert second.json() == first.json()
    assert Task.objects.count() == 1
    assert Conversation.objects.filter(kind=ConversationKind.TASK).count() == 1


def test_a_task_gets_the_explicit_title_when_one_is_given(api):
    response = create_task(api, title="Weekly digest")

    assert Task.objects.get(id=response.json()["taskId"]).title == "Weekly digest"


def test_a_long_first_line_is_shortened_into_the_task_title(api):
    response = create_task(api, text="x" * 300)

    title = Task.objects.get(id=response.json()["taskId"]).title
    assert len(title) == 120
    assert title.endswith("…")


def test_a_follow_up_message_joins_the_task_conversation(api):
    task = create_task(api).json()

    response = api.post(
        f"/api/v1/tasks/{task['taskId']}/messages", {"clientMessageId": "t-2", "text": "and next week?"}, format="json"
    )

    assert response.status_code == 202
    submission = Submission.objects.get(id=response.json()["submissionId"])
    assert str(submission.conversation_id) == task["conversationId"]


def test_the_task_list_shows_each_task_with_its_latest_run_status(api):
    task = create_task(api).json()

    response = api.get("/api/v1/tasks")

    assert response.status_code == 200
    [listed] = response.json()["tasks"]
    assert listed["taskId"] == task["taskId"]
    assert listed["status"] == "queued"
    assert listed["lastRunStartedAt"] is None
    assert set(listed) >= {
        "taskId",
        "conversationId",
        "title",
        "status",
        "createdAt",
        "updatedAt",
        "lastRunStartedAt",
        "lastRunCompletedAt",
    }


def test_the_task_conversation_page_carries_the_task_id_and_title(api):
    task = create_task(api).json()

    response = api.get(f"/api/v1/tasks/{task['taskId']}/conversation")

    assert response.status_code == 200
    body = response.json()
    assert (body["taskId"], body["title"], body["conversationId"]) == (
        task["taskId"],
        "Summarise my week",
        task["conversationId"],
    )
    assert [message["role"] for message in body["messages"]] == ["user", "assistant"]
    assert body["activeSubmissions"][0]["submissionId"] == task["submissionId"]
