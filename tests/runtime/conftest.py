"""The staff member at the admin (the reconciliation desk and the run actions), logged in."""

import pytest
from django.test import Client

from tests.factories import UserFactory


@pytest.fixture
def staff(db):
    return UserFactory(username="desk-clerk", is_staff=True, is_superuser=True)


@pytest.fixture
def desk(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client
