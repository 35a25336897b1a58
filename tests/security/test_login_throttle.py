"""Password forms stop taking guesses for a username from an address after repeated failures."""

import pytest
from django.test import Client

from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def two_failures_allowed(settings):
    settings.IMPO_LIMIT_LOGIN_FAILURES = 2


def log_in(username, password, *, address="192.0.2.1", path="/login/", client=None):
    return (client or Client()).post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail_twice(username, **kwargs):
    for _ in range(2):
        assert log_in(username, "wrong", **kwargs).status_code == 200


def test_after_repeated_failures_even_the_right_password_is_refused_with_429(user):
    fail_twice(user.username)

    response = log_in(user.username, PASSWORD)

    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"
    assert response.json()["requestId"] == response["X-Request-Id"]
    assert int(response["Retry-After"]) > 60


def test_the_same_username_from_another_address_may_still_log_in(user):
    fail_twice(user.username, address="192.0.2.1")

    assert log_in(user.username, PASSWORD, address="198.51.100.7").status_code == 302


def test_a_successful_login_forgets_earlier_failures(user):
    assert log_in(user.username, "wrong").status_code == 200
    assert log_in(user.username, PASSWORD).status_code == 302

    assert log_in(user.username, "wrong").status_code == 200
    assert log_in(user.username, PASSWORD).status_code == 302


def test_guessing_while_signed_in_as_someone_else_still_counts_as_failing(user, other_user):
    attacker = Client()
    attacker.force_login(other_user)
    fail_twice(user.username, client=attacker)

    assert log_in(user.username, PASSWORD, client=attacker).status_code == 429


def test_the_admin_login_form_is_throttled_too(user):
    user.is_staff = True
    user.save()
    fail_twice(user.username, path="/admin/login/")

    assert log_in(user.username, PASSWORD, path="/admin/login/").status_code == 429


def test_login_fails_closed_when_redis_is_unreachable(user, settings):
    settings.REDIS_URL = UNREACHABLE_REDIS

    response = log_in(user.username, PASSWORD)

    assert response.status_code == 503
    assert response.json()["error"] == {
        "code": "service_unavailable",
        "message": "Login is unavailable right now.",
        "retryable": True,
    }
    assert int(response["Retry-After"]) >= 1
