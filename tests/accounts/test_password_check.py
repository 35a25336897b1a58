"""`POST /api/v1/account/password-check`: the account page's check of the password before it asks "for good?". It
changes nothing, and its wrong passwords count with the login form's failures, as the deletion's do."""

import pytest

from runtime.models import Conversation
from tests.client import post_message
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

CHECK = "/api/v1/account/password-check"


def test_the_right_password_is_answered_true_and_changes_nothing(api, user):
    post_message(api, "keep me")

    response = api.post(CHECK, {"password": PASSWORD}, format="json")

    assert response.status_code == 200
    assert response.json() == {"passwordCorrect": True}
    user.refresh_from_db()
    assert user.is_active
    assert Conversation.objects.get(owner=user).deleted_at is None


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"password": "not it"}, 403, "password_incorrect"),
        ({"password": ""}, 400, "invalid_request"),
        ({}, 400, "invalid_request"),
    ],
)
def test_a_wrong_or_missing_password_is_a_clear_refusal(api, body, status, code):
    response = api.post(CHECK, body, format="json")

    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_wrong_passwords_count_with_the_logins_and_are_throttled(api, settings):
    settings.IMPO_LIMIT_LOGIN_FAILURES = 2
    for _ in range(2):
        assert api.post(CHECK, {"password": "guess"}, format="json").status_code == 403

    response = api.post(CHECK, {"password": PASSWORD}, format="json")

    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"
