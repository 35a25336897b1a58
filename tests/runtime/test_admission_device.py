"""A message's `deviceId` must name one of the caller's own devices (docs/design.md §2), checked at admission."""

import uuid

import pytest

from runtime.models import Message, Submission
from tests.client import send_message, start_task
from tests.devices import register_device

pytestmark = pytest.mark.django_db


def assert_not_found_and_nothing_saved(response):
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"
    assert response.json()["requestId"] == response["X-Request-Id"]
    assert Submission.objects.count() == 0
    assert Message.objects.count() == 0


def test_a_message_naming_another_users_device_is_not_found_and_saves_nothing(api, other_api):
    foreign_device = register_device(other_api)

    response = send_message(api, "hi", client_message_id="m", deviceId=foreign_device)

    assert_not_found_and_nothing_saved(response)


def test_a_message_naming_a_device_that_does_not_exist_is_not_found(api):
    response = send_message(api, "hi", client_message_id="m", deviceId=str(uuid.uuid4()))

    assert_not_found_and_nothing_saved(response)


def test_a_task_message_naming_another_users_device_is_not_found(api, other_api):
    task = start_task(api, client_message_id="t")
    foreign_device = register_device(other_api)

    response = send_message(api, "hi", client_message_id="m", task_id=task["taskId"], deviceId=foreign_device)

    assert response.status_code == 404
    assert Submission.objects.count() == 1


def test_a_message_naming_the_callers_own_device_is_admitted_with_it(api):
    device = register_device(api)

    response = send_message(api, "hi", client_message_id="m", deviceId=device)

    assert response.status_code == 202
    assert str(Submission.objects.get().device_id) == device
