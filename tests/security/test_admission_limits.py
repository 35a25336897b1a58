"""Per-user limits at admission: a rate per minute and a cap on queued or running runs (429 + Retry-After)."""

import pytest

from runtime.models import Submission
from tests.concurrency import all_at_once
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db

MESSAGES = "/api/v1/conversation/messages"
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


def post(client, client_message_id, text="hi"):
    return client.post(MESSAGES, {"clientMessageId": client_message_id, "text": text}, format="json")


def assert_rate_limited(response):
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["error"]["code"] == "rate_limited"
    assert body["error"]["retryable"] is True
    assert body["requestId"] == response["X-Request-Id"]
    assert int(response["Retry-After"]) >= 1


def test_messages_beyond_the_per_minute_limit_are_refused_and_save_nothing(api, settings):
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 2
    assert [post(api, f"m-{index}").status_code for index in range(2)] == [202, 202]

    assert_rate_limited(post(api, "m-3"))
    assert Submission.objects.count() == 2


def test_new_tasks_and_task_messages_share_the_users_rate(api, settings):
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 2
    task = api.post("/api/v1/tasks", {"clientMessageId": "t-1", "text": "plan"}, format="json").json()
    assert post(api, "m-1").status_code == 202

    assert_rate_limited(api.post("/api/v1/tasks", {"clientMessageId": "t-2", "text": "more"}, format="json"))
    assert_rate_limited(
        api.post(f"/api/v1/tasks/{task['taskId']}/messages", {"clientMessageId": "m-2", "text": "x"}, format="json")
    )


def test_one_users_flood_does_not_limit_another_user(api, other_api, settings):
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 2
    for index in range(3):
        post(api, f"flood-{index}")

    assert post(other_api, "calm").status_code == 202


def test_a_replayed_message_gets_its_receipt_even_at_the_limit(api, settings):
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 1
    first = post(api, "m-1")

    replay = post(api, "m-1")

    assert replay.status_code == 202
    assert replay.json() == first.json()


def test_messages_beyond_the_active_run_cap_are_refused(api, settings):
    settings.IMPO_LIMIT_ACTIVE_RUNS = 2
    assert [post(api, f"m-{index}").status_code for index in range(2)] == [202, 202]  # no worker: both queued

    assert_rate_limited(post(api, "m-3"))


def test_a_finished_run_frees_its_place_under_the_active_run_cap(api, settings):
    settings.IMPO_LIMIT_ACTIVE_RUNS = 1
    first = post(api, "m-1").json()
    assert api.post(f"/api/v1/submissions/{first['submissionId']}/cancel", {}, format="json").status_code == 200

    assert post(api, "m-2").status_code == 202


def test_admission_fails_open_when_redis_is_unreachable(api, settings):
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 1
    settings.REDIS_URL = UNREACHABLE_REDIS

    assert [post(api, f"m-{index}").status_code for index in range(2)] == [202, 202]


def test_the_active_run_cap_still_holds_when_redis_is_unreachable(api, settings):
    settings.IMPO_LIMIT_ACTIVE_RUNS = 1
    settings.REDIS_URL = UNREACHABLE_REDIS
    post(api, "m-1")

    assert_rate_limited(post(api, "m-2"))


def test_each_user_has_a_budget_of_their_own_across_clients(user, settings):
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 2
    phone, laptop = bearer_client(user), bearer_client(user)
    post(phone, "m-1")
    post(laptop, "m-2")

    assert_rate_limited(post(phone, "m-3"))


@pytest.mark.django_db(transaction=True)
def test_copies_of_one_command_sent_together_at_the_limit_all_get_its_receipt(user, settings):
    """A client retrying a request whose answer it lost: each copy is the same command, counted once."""
    settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE = 3
    client = bearer_client(user)
    assert [post(client, f"m-{index}").status_code for index in range(2)] == [202, 202]

    copies = all_at_once(20, lambda _: post(bearer_client(user), "m-last", text="the same"))

    assert [copy.status_code for copy in copies] == [202] * 20, [copy.content for copy in copies]
    assert len({copy.json()["submissionId"] for copy in copies}) == 1
    assert Submission.objects.count() == 3
    assert_rate_limited(post(client, "m-beyond"))
