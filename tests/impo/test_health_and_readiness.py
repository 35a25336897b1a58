import logging
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from devtools.stack import wait_until
from impo import health, worker_liveness
from runtime.models import Run
from runtime.services.claims import claim_run, release_for_provider
from tests.client import post_message, run_in_state
from tests.conftest import bearer_client
from tests.factories import UserFactory
from tests.faults.instances import PrivateRedis

pytestmark = pytest.mark.django_db

UNREACHABLE_TEMPORAL = "127.0.0.1:1"
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


def test_health_needs_no_authentication():
    response = APIClient().get("/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_reports_each_dependency_and_the_workers(workers, temporal_address, settings):
    settings.TEMPORAL_ADDRESS = temporal_address

    # Each check has a short budget (2 s), which a saturated test machine can overrun once: asked again, it answers.
    response = wait_until(
        lambda: (answer := APIClient().get("/ready")).status_code == 200 and answer,
        timeout=60,
        interval=1,
        what="/ready to answer 200",
    )

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


def test_workers_are_unknown_not_failing_while_redis_cannot_be_reached(settings):
    settings.REDIS_URL = UNREACHABLE_REDIS

    body = APIClient().get("/ready").json()

    assert body["checks"]["redis"] == "failing"
    assert body["checks"]["workers"] == "unknown"
    assert "workers" not in body["error"]["message"]


@pytest.mark.processes
def test_workers_are_unknown_until_a_restarted_redis_could_have_their_heartbeats(settings):
    fresh = PrivateRedis()  # as Redis just restarted: every heartbeat sent before is gone
    try:
        settings.REDIS_URL = fresh.url
        first = APIClient().get("/ready").json()["checks"]

        later = wait_until(
            lambda: (checks := APIClient().get("/ready").json()["checks"])["workers"] != "unknown" and checks,
            timeout=60,
            what="the heartbeats' lifetime to pass",
        )
    finally:
        fresh.stop()

    assert (first["redis"], first["workers"]) == ("ok", "unknown")
    assert later["workers"] == "failing"  # no worker of this queue beat since


@pytest.mark.django_db(transaction=True)  # /ready reads on a connection of its own: the run must be committed
def test_a_provider_backing_off_is_reported_and_does_not_fail_readiness(api, desk, settings, temporal_address):
    settings.TEMPORAL_ADDRESS = temporal_address
    settings.CELERY_TASK_DEFAULT_QUEUE = f"impo-ready-{uuid.uuid4()}"
    worker_liveness.beat("ready-test@here")  # a live worker of this queue, as far as its heartbeat says
    receipt = api.post("/api/v1/conversation/messages", {"clientMessageId": "m-1", "text": "hi"}, format="json").json()
    run = Run.objects.get(submission_id=receipt["submissionId"])
    lease = claim_run(run.id, "worker-a")
    release_for_provider(lease, cause="provider unavailable: 503")
    Run.objects.filter(id=run.id).update(not_before=timezone.now() + timedelta(minutes=5))

    anonymous = APIClient().get("/ready")
    staff = desk.get("/ready")

    assert anonymous.status_code == 200, anonymous.json()
    assert anonymous.json()["provider"] == {"state": "backing_off"}
    assert staff.json()["provider"] == {"state": "backing_off", "runsBackingOff": 1, "runsParked": 0}


def test_the_provider_is_ok_when_no_run_waits_for_it(settings):
    # A queue of its own: no failure another test's processes saw lately is this one's.
    settings.CELERY_TASK_DEFAULT_QUEUE = f"impo-ready-{uuid.uuid4()}"

    assert APIClient().get("/ready").json()["provider"] == {"state": "ok"}


def provider_state() -> str:
    return APIClient().get("/ready").json()["provider"]["state"]


@pytest.mark.django_db(transaction=True)  # real workers read what the test wrote
def test_ready_says_the_provider_is_not_ok_while_its_calls_fail_and_ok_again_after(stack, api, rebyte_double, settings):
    # Temporal is not what this reads: an address that refuses at once keeps each probe short.
    settings.TEMPORAL_ADDRESS = UNREACHABLE_TEMPORAL
    stack.start_worker()
    stack.start_sweeper()
    rebyte_double.fault("*", "http_error", status=503, until_ended=True)  # ended below, once /ready has seen it
    submission_id = post_message(api, "during the outage")["submissionId"]

    seen = wait_until(
        lambda: (state := provider_state()) != "ok" and state,
        timeout=60,
        interval=0.2,
        what="/ready to see the provider's calls fail",
    )
    rebyte_double.end_faults()
    run_in_state(submission_id, timeout=60)
    wait_until(lambda: provider_state() == "ok", timeout=30, interval=0.2, what="/ready to say ok again")

    assert seen in ("failing", "backing_off")


def test_readiness_polls_while_not_ready_write_one_warning_and_no_error(settings, caplog, monkeypatch):
    monkeypatch.setattr(health, "_readiness", health.ReadinessLog())  # this process's last answer, unknown
    settings.CELERY_TASK_DEFAULT_QUEUE = f"impo-nobody-{uuid.uuid4()}"
    settings.TEMPORAL_ADDRESS = UNREACHABLE_TEMPORAL  # refused at once: failing at every poll, whatever the load
    caplog.set_level(logging.INFO)

    for _ in range(3):
        assert APIClient().get("/ready").status_code == 503

    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "impo.health"]
    assert lines == [("WARNING", "not ready: temporal, workers failing")]


def test_each_change_of_what_fails_readiness_is_one_line(caplog):
    caplog.set_level(logging.INFO, logger="impo.health")
    readiness = health.ReadinessLog()

    for failing in ({"workers"}, {"workers"}, {"redis", "workers"}, set(), set()):
        readiness.note(frozenset(failing))

    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "not ready: workers failing"),
        ("WARNING", "not ready: redis, workers failing"),
        ("INFO", "ready"),
    ]
