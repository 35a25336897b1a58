"""Password forms stop taking guesses for a username from an address after repeated failures."""

import pytest
from django.test import Client

from core import limits, login
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def two_failures_allowed(settings):
    settings.IMPO_LIMIT_LOGIN_FAILURES = 2


@pytest.fixture(autouse=True)
def no_failures_from_earlier_tests(settings):
    """The tests reuse a few addresses: counts left in Redis by an earlier test (or run) would refuse them."""
    client = limits.redis_client()
    database = settings.DATABASES["default"]["NAME"]
    for key in client.scan_iter(match=f"impo:limits:{database}:{login.LIMIT}*"):
        client.delete(key)


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


def test_one_address_guessing_across_usernames_is_refused_for_every_username(user, settings):
    settings.IMPO_LIMIT_LOGIN_FAILURES_PER_ADDRESS = 3
    for guessed in ("alice", "bob", "carol"):
        assert log_in(guessed, "wrong", address="192.0.2.9").status_code == 200

    assert log_in(user.username, PASSWORD, address="192.0.2.9").status_code == 429
    assert log_in(user.username, PASSWORD, address="198.51.100.7").status_code == 302


def test_a_successful_login_does_not_reset_its_addresses_count(user, other_user, settings):
    settings.IMPO_LIMIT_LOGIN_FAILURES_PER_ADDRESS = 3
    for guessed in ("alice", "bob"):
        assert log_in(guessed, "wrong", address="192.0.2.10").status_code == 200
    assert log_in(other_user.username, PASSWORD, address="192.0.2.10").status_code == 302  # the attacker's own account
    assert log_in("carol", "wrong", address="192.0.2.10").status_code == 200

    assert log_in(user.username, PASSWORD, address="192.0.2.10").status_code == 429


@pytest.mark.parametrize(
    ("host", "forwarded", "warned"),
    [
        ("0.0.0.0", "", True),
        ("10.1.2.3", "", True),
        ("0.0.0.0", "10.0.0.5", False),
        ("127.0.0.1", "", False),
        ("::1", "", False),
        ("localhost", "", False),
    ],
)
def test_the_web_server_warns_when_it_serves_beyond_loopback_without_a_trusted_proxy(host, forwarded, warned):
    from impo.web_server import forwarded_addresses_warning

    warning = forwarded_addresses_warning(host, forwarded)

    assert (warning is not None) is warned
    if warned:
        assert "IMPO_WEB_FORWARDED_ALLOW_IPS" in warning
