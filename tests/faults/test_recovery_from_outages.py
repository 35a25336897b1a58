"""Outages of what Impo stands on, under load, on a PostgreSQL and a Redis of the suite's own.

A PostgreSQL restart, Redis stopped for 15 s, and the provider answering 5xx for five times the longest wait between
two attempts (the backoff cap, shortened here to a second: what holds at any cap holds at a short one). After each:
every accepted command settles within lease + sweep interval + 10 s of the end of the outage, every process is still
the one that was started (none needed a manual restart), and `/ready` answered 503 while a dependency it checks was
down. The figures are printed.
"""

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest

from devtools.stack import MAKE_RUN_WEB_PROCESSES, REPO_ROOT, RebyteDouble, Stack, start_web, wait_until
from devtools.websocket import WebsocketConnection
from tests.faults.instances import PrivatePostgres, PrivateRedis

pytestmark = pytest.mark.slow

SWEEP_SECONDS = 0.3
SETTLE_BOUND_SECONDS = Stack.LEASE_SECONDS + SWEEP_SECONDS + 10
TERMINAL = ("completed", "failed", "cancelled")
BACKOFF_CAP_SECONDS = 1
PROVIDER_OUTAGE_SECONDS = 5 * BACKOFF_CAP_SECONDS
USERS = 3

CREATE_USERS = """
import json
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

users = [get_user_model().objects.create_user(f"faults-{{n}}", password=f"unused-{{n}}") for n in range({users})]
print(json.dumps([Token.objects.create(user=user).key for user in users]))
"""


@dataclass
class Outage:
    postgres: PrivatePostgres
    redis: PrivateRedis
    double: RebyteDouble
    stack: Stack
    web_url: str
    tokens: list[str]
    sent: int = 0
    figures: list[str] = field(default_factory=list)

    def post(self, user: int) -> httpx.Response:
        self.sent += 1
        return httpx.post(
            f"{self.web_url}/api/v1/conversation/messages",
            json={"clientMessageId": f"faults-{self.sent}", "text": f"message {self.sent}"},
            headers=self.auth(user),
            timeout=30,
        )

    def auth(self, user: int) -> dict:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def post_accepted(self, count: int) -> list[str]:
        receipts = [self.post(n % USERS) for n in range(count)]
        assert [r.status_code for r in receipts] == [202] * count, [r.text for r in receipts]
        return [r.json()["submissionId"] for r in receipts]

    def states(self, submission_ids: list[str]) -> dict[str, str]:
        with psycopg.connect(self.postgres.url("impo_faults"), connect_timeout=5) as connection:
            rows = connection.execute(
                "SELECT submission_id::text, state FROM runtime_run WHERE submission_id::text = ANY(%s)",
                [submission_ids],
            ).fetchall()
        return dict(rows)

    def wait_settled(self, submission_ids: list[str], *, timeout: float) -> dict[str, str]:
        def settled():
            states = self.states(submission_ids)
            return states if len(states) == len(submission_ids) and set(states.values()) <= set(TERMINAL) else None

        return wait_until(settled, timeout=timeout, interval=0.2, what="every accepted command to settle")

    def processes_alive(self) -> list[str]:
        return [process.name for process in self.stack.processes if not process.alive]


def ready(web_url: str) -> bool:
    """Whether `/ready` answers 200. A new web process's first answers can take seconds on a loaded machine: one that
    has not come yet is a "not yet", as in ReadinessWatcher, not the end of the wait for it."""
    try:
        return httpx.get(f"{web_url}/ready", timeout=15).status_code == 200
    except httpx.TransportError:
        return False


class ReadinessWatcher:
    """Polls `/ready` in the background and keeps every status it answered."""

    def __init__(self, web_url: str):
        self.url = f"{web_url}/ready"
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stop.wait(0.2):
            try:
                self.statuses.append(httpx.get(self.url, timeout=15).status_code)
            except httpx.TransportError:
                self.statuses.append(0)

    def saw_outage(self) -> bool:
        return 503 in self.statuses

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def outage(temporal_address):
    postgres, redis = PrivatePostgres(), PrivateRedis()
    double = RebyteDouble()
    stack = None
    try:
        postgres.create_database("impo_faults")
        env = {
            **os.environ,
            "DATABASE_URL": postgres.url("impo_faults"),
            "REDIS_URL": redis.url,
            "TEMPORAL_ADDRESS": temporal_address,
        }
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--no-input"], cwd=REPO_ROOT, env=env, check=True, capture_output=True)
        created = subprocess.run(
            [*manage, "shell", "-c", CREATE_USERS.format(users=USERS)],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        tokens = json.loads(created.stdout.strip().splitlines()[-1])
        stack = Stack(database_name="", double=double, redis_url=redis.url, database_url=postgres.url("impo_faults"))
        stack.env["TEMPORAL_ADDRESS"] = temporal_address
        stack.env["IMPO_PROVIDER_BACKOFF_CAP_SECONDS"] = str(BACKOFF_CAP_SECONDS)
        stack.start_worker("faults-worker-1")
        stack.start_worker("faults-worker-2")
        stack.start_sweeper(SWEEP_SECONDS)
        _, web_url = start_web(stack, processes=MAKE_RUN_WEB_PROCESSES)
        wait_until(lambda: ready(web_url), timeout=120, what="/ready")
        yield Outage(postgres, redis, double, stack, web_url, tokens)
    finally:
        if stack is not None:
            stack.stop()
        double.stop()
        redis.stop()
        postgres.destroy()


def measure(outage: Outage, name: str, submission_ids: list[str], outage_ended: float, capsys) -> dict[str, str]:
    states = outage.wait_settled(submission_ids, timeout=180)
    settled_after = time.monotonic() - outage_ended
    outage.figures.append(
        f"{name}: {len(submission_ids)} accepted commands settled {settled_after:.1f} s after the outage ended "
        f"(bound {SETTLE_BOUND_SECONDS:.1f} s); outcomes {sorted(states.values())}"
    )
    with capsys.disabled():
        print("\n" + outage.figures[-1])  # the figures are printed past output capture, like the chaos run's
    assert settled_after <= SETTLE_BOUND_SECONDS, outage.figures[-1]
    return states


def test_a_postgresql_restart_under_load_loses_nothing_and_stops_no_process(outage, capsys):
    outage.double.configure(delta_delay_ms=150, delta_chunks=4)
    accepted = outage.post_accepted(9)
    wait_until(lambda: "running" in outage.states(accepted).values(), timeout=60, what="runs to be under way")
    readiness = ReadinessWatcher(outage.web_url)

    outage.postgres.stop()
    wait_until(readiness.saw_outage, timeout=30, what="/ready to report the database down")
    outage.postgres.start()
    ended = time.monotonic()

    states = measure(outage, "PostgreSQL restart", accepted, ended, capsys)
    readiness.stop()
    assert set(states.values()) == {"completed"}
    assert outage.processes_alive() == []
    wait_until(lambda: ready(outage.web_url), timeout=60, what="/ready")
    assert outage.post_accepted(USERS)  # the web process took commands again without being restarted


def test_redis_stopped_for_15_seconds_under_load_loses_nothing_and_the_api_keeps_answering(outage, capsys):
    outage.double.configure(delta_delay_ms=150, delta_chunks=4)
    before = outage.post_accepted(6)
    readiness = ReadinessWatcher(outage.web_url)

    outage.redis.stop()
    stopped = time.monotonic()
    during = outage.post_accepted(3)  # admission needs PostgreSQL only; the lost wake-ups are re-sent later
    submission = httpx.get(f"{outage.web_url}/api/v1/submissions/{during[0]}", headers=outage.auth(0), timeout=30)
    cancel = httpx.post(
        f"{outage.web_url}/api/v1/submissions/{during[-1]}/cancel", json={}, headers=outage.auth(2), timeout=30
    )
    conversation = httpx.get(f"{outage.web_url}/api/v1/conversation", headers=outage.auth(0), timeout=30).json()
    socket = WebsocketConnection(
        f"{outage.web_url.replace('http', 'ws')}/ws/v1/conversations/{conversation['conversationId']}/"
        f"?after=0&token={outage.tokens[0]}"
    )
    replayed = socket.receive_json(timeout=15)
    wait_until(readiness.saw_outage, timeout=30, what="/ready to report Redis down")
    wait_until(lambda: time.monotonic() - stopped >= 15, timeout=30, what="15 s of outage")
    outage.redis.start()
    ended = time.monotonic()

    states = measure(outage, "Redis stopped 15 s", before + during, ended, capsys)
    readiness.stop()
    socket.abort()
    assert (submission.status_code, cancel.status_code) == (200, 200)
    assert replayed["seq"] == 1  # the socket was served from the event log while Redis was down
    assert states.pop(during[-1]) in ("cancelled", "completed")
    assert set(states.values()) == {"completed"}
    assert outage.processes_alive() == []


def test_the_provider_answering_5xx_for_five_backoff_caps_under_load_fails_nothing(outage, capsys):
    # Each user's agent and session exist before the outage, whichever test ran first on this stack: a create
    # answered 5xx is an unknown outcome, parked for reconciliation by design, which is not what this test is about.
    warmed = outage.wait_settled(outage.post_accepted(USERS), timeout=120)
    assert set(warmed.values()) == {"completed"}
    outage.double.configure(delta_delay_ms=50, delta_chunks=4)
    outage.double.fault("*", "http_error", status=503, seconds=PROVIDER_OUTAGE_SECONDS)
    started = time.monotonic()

    accepted = outage.post_accepted(6)
    wait_until(
        lambda: time.monotonic() - started >= PROVIDER_OUTAGE_SECONDS,
        timeout=PROVIDER_OUTAGE_SECONDS + 30,
        what="the 5xx to pass",
    )
    ended = time.monotonic()

    states = measure(outage, f"provider 5xx for {PROVIDER_OUTAGE_SECONDS} s", accepted, ended, capsys)
    assert set(states.values()) == {"completed"}
    assert outage.processes_alive() == []
