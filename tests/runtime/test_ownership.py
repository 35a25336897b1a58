import uuid

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def others_task(other_api):
    return other_api.post("/api/v1/tasks", {"clientMessageId": "x", "text": "private plan"}, format="json").json()


def assert_not_found(response):
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_another_users_submission_is_not_found(api, others_task):
    assert_not_found(api.get(f"/api/v1/submissions/{others_task['submissionId']}"))


def test_another_users_task_conversation_is_not_found(api, others_task):
    assert_not_found(api.get(f"/api/v1/tasks/{others_task['taskId']}/conversation"))


def test_posting_into_another_users_task_is_not_found_and_saves_nothing(api, others_task):
    from runtime.models import Submission

    response = api.post(
        f"/api/v1/tasks/{others_task['taskId']}/messages", {"clientMessageId": "mine", "text": "hi"}, format="json"
    )

    assert_not_found(response)
    assert not Submission.objects.filter(client_message_id="mine").exists()


def test_another_users_tasks_are_not_listed(api, others_task):
    assert api.get("/api/v1/tasks").json() == {"tasks": []}


def test_an_unknown_submission_is_not_found_exactly_like_another_users(api, others_task):
    unknown = api.get(f"/api/v1/submissions/{uuid.uuid4()}")
    foreign = api.get(f"/api/v1/submissions/{others_task['submissionId']}")

    assert unknown.status_code == foreign.status_code == 404
    assert unknown.json()["error"] == foreign.json()["error"]
