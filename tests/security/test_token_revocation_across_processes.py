"""Bearer tokens are cached in Redis for every web process; a revocation is seen by all of them at once."""

import httpx
import pytest
import redis
from django.conf import settings
from django.db import transaction
from rest_framework.authtoken.models import Token

from core.authentication import token_cache_key, user_for_token
from core.errors import ServiceUnavailable
from devtools.stack import free_port, start_web
from tests.client import token_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_web_processes(stack):
    return [start_web(stack)[1] for _ in range(2)]


def status_of(web_url: str, token: str) -> int:
    return httpx.get(f"{web_url}/api/v1/tasks", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code


def cached(token: str) -> bytes | None:
    return redis.Redis.from_url(settings.REDIS_URL).get(token_cache_key(token))


def test_a_deleted_token_is_refused_on_the_next_request_by_every_web_process(two_web_processes, user):
    token = token_of(user)
    assert [status_of(url, token) for url in two_web_processes] == [200, 200]
    assert cached(token) not in (None, b"-")  # both processes now answer from the cache

    Token.objects.get(key=token).delete()

    assert [status_of(url, token) for url in two_web_processes] == [401, 401]


def test_a_deactivated_users_token_is_refused_on_the_next_request_by_every_web_process(two_web_processes, user):
    token = token_of(user)
    assert [status_of(url, token) for url in two_web_processes] == [200, 200]

    user.is_active = False
    user.save()

    assert [status_of(url, token) for url in two_web_processes] == [401, 401]


def test_a_reactivated_user_is_served_again_from_the_database_while_the_tombstone_lasts(two_web_processes, user):
    token = token_of(user)
    user.is_active = False
    user.save()
    assert status_of(two_web_processes[0], token) == 401

    user.is_active = True
    user.save()

    assert [status_of(url, token) for url in two_web_processes] == [200, 200]
    assert cached(token) == b"-"  # the tombstone keeps refills out until it expires; the database answers meanwhile


@pytest.mark.django_db
def test_a_user_read_from_the_token_cache_has_each_field_in_its_place(user):
    token = token_of(user)
    first = user_for_token(token)  # read from the database, and cached
    assert cached(token) is not None

    second = user_for_token(token)  # read from the cache

    for found in (first, second):
        assert (found.pk, found.get_username(), found.is_active) == (user.pk, user.username, True)
        assert (found.is_staff, found.is_superuser) == (False, False)


@pytest.mark.django_db
def test_a_revocation_that_cannot_reach_the_token_cache_is_refused_as_unavailable_and_undone(user, settings):
    """As an account deletion met it during a Redis restart: a 503 to try again, not a 500, and nothing revoked."""
    token = token_of(user)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there

    with pytest.raises(ServiceUnavailable), transaction.atomic():
        Token.objects.filter(key=token).delete()

    assert Token.objects.filter(key=token).exists()
