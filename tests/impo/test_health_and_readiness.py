import uuid

import pytest
from rest_framework.test import APIClient

from impo.devstack import wait_until
from tests.conftest import bearer_client
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

UNREACHABLE_TEMPORAL = "127.0.0.1:1"


def test_health_needs_no_authentication():
    response = APIClient().get("/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_reports_each_dependency_and_the_workers(workers, temporal_address, settings):
    settings.TEMPORAL_ADDRESS = temporal_address

    response = APIClient().get("/ready")

    assert response.status_code == 200, response.json()
    assert response.json()["checks"] == {"database": "ok", "redis": "ok", "temporal": "ok", "workers": "ok"}


def test_ready_is_unavailable_when_no_worker_serves_the_queue(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = f"impo-nobody-{uuid.uuid4()}"

    response = APIClient().get("/ready")

    assert response.status_code == 503
    assert response.json()["checks"]["workers"] == "failing"


def test_a_worker_that_stops_no_longer_counts_as_alive(stack):
    worker = stack.start_worker()
    wait_until(lambda: APIClient().get("/ready").json()["checks"]["workers"] == "ok", timeout=30, what="a heartbeat")

    worker.stop()

    assert APIClient().get("/ready").json()["checks"]["workers"] == "failing"


def test_ready_notices_killed_workers_once_their_heartbeats_expire(stack):
    workers = [stack.start_worker("worker-1"), stack.start_worker("worker-2")]
    wait_until(lambda: APIClient().get("/ready").json()["checks"]["workers"] == "ok", timeout=30, what="a heartbeat")

    for worker in workers:
        worker.kill()  # no goodbye: only the heartbeat's expiry tells

    wait_until(
        lambda: APIClient().get("/ready").json()["checks"]["workers"] == "failing", timeout=60, what="/ready to notice"
    )


def test_ready_is_unavailable_when_temporal_is_unreachable(settings):
    settings.TEMPORAL_ADDRESS = UNREACHABLE_TEMPORAL

    response = APIClient().get("/ready")

    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["temporal"] == "failing"
    assert body["error"]["code"] == "not_ready"
    assert body["error"]["retryable"] is True
    assert body["requestId"] == response["X-Request-Id"]


def test_anonymous_callers_are_told_what_fails_but_not_why(settings):
    settings.TEMPORAL_ADDRESS = UNREACHABLE_TEMPORAL

    message = APIClient().get("/ready").json()["error"]["message"]

    assert "temporal" in message
    assert UNREACHABLE_TEMPORAL not in message and "rror" not in message


def test_staff_see_why_a_dependency_fails(settings):
    settings.TEMPORAL_ADDRESS = UNREACHABLE_TEMPORAL
    staff = bearer_client(UserFactory(is_staff=True))

    message = staff.get("/ready").json()["error"]["message"]

    assert message.startswith("temporal: ") and message != "temporal: "
