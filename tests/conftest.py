import uuid

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import UserFactory


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Real hashing costs ~0.3 s per user; tests check authorization, not hash strength. The real
    # hasher stays available for users that a server process (which hashes for real) must verify.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ]


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture
def staff(db):
    """A staff member at the admin (the reconciliation desk)."""
    return UserFactory(username="desk-clerk", is_staff=True, is_superuser=True)


@pytest.fixture
def desk(staff) -> Client:
    """The admin, logged in as `staff`."""
    client = Client()
    client.force_login(staff)
    return client


def bearer_client(user) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    return bearer_client(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return bearer_client(other_user)


@pytest.fixture
def new_client_message_id():
    return lambda: str(uuid.uuid4())


@pytest.fixture(scope="session")
def temporal_address():
    from tests.processes import start_temporal_dev_server

    server, address = start_temporal_dev_server()
    yield address
    server.stop()


@pytest.fixture(scope="session")
def rebyte_double_process():
    from tests.processes import RebyteDouble

    double = RebyteDouble()
    yield double
    double.stop()


@pytest.fixture
def rebyte_double(rebyte_double_process, settings):
    """The shared double, emptied, with this process pointed at it."""
    rebyte_double_process.reset()
    settings.REBYTE_BASE_URL = rebyte_double_process.api_url
    return rebyte_double_process


@pytest.fixture
def stack(transactional_db, rebyte_double, settings):
    """Real worker processes need committed data, hence the transactional database."""
    from django.db import connection

    from impo.celery import app
    from tests.processes import Stack

    app.control.purge()
    running = Stack(database_name=connection.settings_dict["NAME"], double=rebyte_double, redis_url=settings.REDIS_URL)
    yield running
    running.stop()
