"""`DELETE /api/v1/account` with the password, through the API with real workers and the double: a token alone does
not delete; the account stops signing in at once; every conversation's sessions, then the agent, are deleted at the
provider; tokens, webhooks, push subscriptions and schedules go; the user goes last."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from devtools.stack import wait_until
from rebyte.models import CreationIntent, DeletionIntent, OwnerInstructions
from runtime.models import Conversation, Run, RunState
from tests.client import post_message, start_task
from tests.factories import PASSWORD
from webhooks.models import PushSubscription, WebhookEndpoint


def delete_account(client, body):
    return client.delete("/api/v1/account", body, format="json")


def completed(submission_id):
    wait_until(
        lambda: Run.objects.filter(submission_id=submission_id, state=RunState.COMPLETED).exists(),
        timeout=30,
        what="the reply",
    )


def user_gone(user_id):
    return wait_until(
        lambda: not get_user_model().objects.filter(pk=user_id).exists(), timeout=90, what="the user to be deleted"
    )


def hooks_and_browsers_of(user):
    WebhookEndpoint.objects.create(owner=user, url="https://hooks.example.com/impo", secret="s", event_types=[])
    PushSubscription.objects.create(owner=user, endpoint="https://push.example.com/1", p256dh="k", auth="a")


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{"password": "not the password"}, {"password": ""}, {}])
def test_a_token_without_the_password_deletes_nothing(api, user, body):
    post_message(api, "keep me")
    hooks_and_browsers_of(user)

    response = delete_account(api, body)

    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"] in {"password_incorrect", "invalid_request"}
    user.refresh_from_db()
    assert user.is_active
    assert api.get("/api/v1/conversation").status_code == 200
    assert Conversation.objects.get(owner=user).deleted_at is None
    assert WebhookEndpoint.objects.filter(owner=user).exists()
    assert PushSubscription.objects.filter(owner=user).exists()


@pytest.mark.django_db
def test_wrong_passwords_count_with_the_logins_and_are_throttled(api, settings):
    settings.IMPO_LIMIT_LOGIN_FAILURES = 2
    for _ in range(2):
        assert delete_account(api, {"password": "guess"}).status_code == 403

    response = delete_account(api, {"password": PASSWORD})

    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"


def test_deleting_the_account_removes_it_everywhere_the_provider_included(workers, api, user, rebyte_double):
    main = post_message(api, "hello")
    task = start_task(api, "plan a trip")
    completed(main["submissionId"])
    completed(task["submissionId"])
    hooks_and_browsers_of(user)
    state = rebyte_double.state()
    assert (state["counts"]["agents"], state["counts"]["sessions"]) == (1, 2)

    response = delete_account(api, {"password": PASSWORD})

    assert response.status_code == 202
    assert response.json() == {"deleted": True}
    assert api.get("/api/v1/conversation").status_code == 401
    assert not Token.objects.filter(user=user).exists()
    assert not WebhookEndpoint.objects.filter(owner=user).exists()
    assert not PushSubscription.objects.filter(owner=user).exists()
    assert not Conversation.objects.filter(owner=user, deleted_at__isnull=True).exists()

    user_gone(user.pk)
    state = rebyte_double.state()
    assert (state["counts"]["agents"], state["counts"]["sessions"]) == (0, 0)
    assert state["requests"]["delete_agent"] == 1
    assert not Conversation.objects.filter(owner_id=user.pk).exists()
    assert not DeletionIntent.objects.filter(owner_id=user.pk).exists()


def test_an_agent_delete_refused_for_now_is_retried(workers, api, user, rebyte_double):
    completed(post_message(api, "hello")["submissionId"])
    rebyte_double.fault("delete_agent", "http_error", status=502, times=1)

    assert delete_account(api, {"password": PASSWORD}).status_code == 202

    user_gone(user.pk)
    assert rebyte_double.state()["counts"]["agents"] == 0
    assert rebyte_double.state()["requests"]["delete_agent"] == 2


def test_custom_instructions_and_every_agent_they_made_go_with_the_account(workers, api, user, rebyte_double):
    api.put("/api/v1/account/instructions", {"text": "Answer in French."}, format="json")
    completed(post_message(api, "hello")["submissionId"])
    api.put("/api/v1/account/instructions", {"text": "Answer in German."}, format="json")
    completed(post_message(api, "again", client_message_id="m-2")["submissionId"])
    assert rebyte_double.state()["requests"]["create_agent"] == 2

    assert delete_account(api, {"password": PASSWORD}).status_code == 202

    user_gone(user.pk)
    assert rebyte_double.state()["counts"]["agents"] == 0
    assert not OwnerInstructions.objects.filter(owner_id=user.pk).exists()
    assert not CreationIntent.objects.filter(owner_id=user.pk).exists()  # nor the words kept with each agent's create
