"""Liveness (`/health`) and readiness (`/ready`: every dependency answers, and the provider's state beside them).

What fails readiness is what this web process needs to serve: the database, Redis, Temporal, and live workers of
its queue. Workers are judged from their heartbeats in Redis, so when Redis cannot say (unreachable, or restarted
less than a heartbeat's lifetime ago, its beats gone with it) they are "unknown", which does not fail readiness:
they were alive the whole time of a Redis outage, and the outage itself fails the `redis` check. The provider's
state is reported but never fails readiness: a load balancer taking web processes out during a provider outage would
refuse the commands that queue until it ends. It is what the workers see: "failing" while their calls fail (any
process's failure of the last seconds, counted in Redis), "backing_off" while runs wait out its backoff or wait,
parked, for a look at a create it left in doubt (read from PostgreSQL), "ok" otherwise.

A 503 from `/ready` is an answer, not a server error: a load balancer polls it every few seconds while the stack
starts or a dependency is down, and Django's request logger wrote each one at ERROR. The view says what changed
instead, one line per change of what fails (WARNING, or INFO once ready), and marks its 503 as logged; any other 5xx
(an exception in the probe itself) is still Django's ERROR line.
"""

import asyncio
import logging
import threading

import psycopg
import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from django.http import JsonResponse
from temporalio.client import Client as TemporalClient
from temporalio.service import RPCError

from core.authentication import request_user
from core.error_codes import ErrorCode
from core.middleware import request_id_for
from impo import worker_liveness
from rebyte import provider_errors
from runtime.models import Run, RunState
from runtime.services import claims as claim_rule

READINESS_TIMEOUT_SECONDS = 2.0
logger = logging.getLogger(__name__)


class ReadinessLog:
    """What failed readiness at the last answer of this process, and the one line each change of it is worth."""

    def __init__(self):
        self._lock = threading.Lock()
        self._failing: frozenset[str] | None = None  # None: not answered yet

    def note(self, failing: frozenset[str]) -> None:
        with self._lock:
            if failing == self._failing:
                return
            self._failing = failing
        if failing:
            logger.warning("not ready: %s failing", ", ".join(sorted(failing)))
        else:
            logger.info("ready")


_readiness = ReadinessLog()


def health(request):
    return JsonResponse({"status": "ok"})


def _probe_database() -> tuple[str | None, tuple[int, int] | None]:
    """(what is wrong with the database or None, (queued runs waiting out a provider backoff, runs parked until the
    reconciler looks at a create in doubt) or None if unknown)."""
    # A connection of its own, with a short timeout: the web process's pool would make a readiness probe
    # wait out its checkout timeout while PostgreSQL is down, and answer nothing in time.
    database = connection.settings_dict
    waiting = Run.objects.filter(
        claim_rule.backing_off()
        # Parked runs a person must settle are not waiting on the provider.
        | Q(state=RunState.PENDING_RECONCILIATION) & ~Q(remote_turn__pending_intent__needs_staff=True)
    ).values("state")
    waiting, params = waiting.query.sql_with_params()
    try:
        with psycopg.connect(
            dbname=database["NAME"],
            user=database["USER"],
            password=database["PASSWORD"] or None,
            host=database["HOST"] or None,
            port=database["PORT"] or None,
            connect_timeout=max(1, int(READINESS_TIMEOUT_SECONDS)),
        ) as probe:
            (backing_off, parked) = probe.execute(
                f"SELECT count(*) FILTER (WHERE state = %s), count(*) FILTER (WHERE state = %s) FROM ({waiting}) AS w",
                [RunState.QUEUED, RunState.PENDING_RECONCILIATION, *params],
            ).fetchone()
    except psycopg.Error as exc:
        return str(exc), None
    return None, (backing_off, parked)


def _redis_ready() -> str | None:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=READINESS_TIMEOUT_SECONDS).ping()
    except redis.RedisError as exc:
        return str(exc)
    return None


async def _temporal_serves(address: str, namespace: str) -> bool:
    client = await TemporalClient.connect(address, namespace=namespace)
    return await client.service_client.check_health()


def temporal_problem(address: str, namespace: str, *, timeout: float = READINESS_TIMEOUT_SECONDS) -> str | None:
    """What keeps the Temporal server at `address` from serving (unreachable, refusing, not serving), or None."""
    try:
        serving = asyncio.run(asyncio.wait_for(_temporal_serves(address, namespace), timeout))
    except (RuntimeError, RPCError, TimeoutError, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None if serving else "not serving"


def _workers_state() -> tuple[str, str | None]:
    """("ok" | "failing" | "unknown", why not ok)."""
    try:
        alive = worker_liveness.alive_count()
        if alive:
            return "ok", None
        restarted_ago = worker_liveness.redis_uptime_seconds()
    except redis.RedisError as exc:
        return "unknown", f"heartbeats unreadable: {exc}"
    if restarted_ago < worker_liveness.HEARTBEAT_TTL_SECONDS:
        return "unknown", f"Redis restarted {restarted_ago} s ago, before the next heartbeats"
    return "failing", "no worker has sent a heartbeat recently"


def _staff(request) -> bool:
    try:
        user = request_user(request)
    except DatabaseError:
        return False  # with the database down nobody can be recognised, so nobody gets the detail
    return user is not None and user.is_staff


def ready(request):
    database_problem, runs_waiting = _probe_database()
    workers_state, workers_problem = _workers_state()
    temporal = temporal_problem(settings.TEMPORAL_ADDRESS, settings.TEMPORAL_NAMESPACE)
    checks = {
        "database": ("failing", database_problem) if database_problem else ("ok", None),
        "redis": ("failing", problem) if (problem := _redis_ready()) else ("ok", None),
        "temporal": ("failing", temporal) if temporal else ("ok", None),
        "workers": (workers_state, workers_problem),
    }
    failing = {name: problem for name, (state, problem) in checks.items() if state == "failing"}
    detailed = _staff(request)
    body = {
        "status": "ready" if not failing else "unavailable",
        "checks": {name: state for name, (state, _) in checks.items()},
        "provider": _provider(runs_waiting, detailed),
    }
    if failing:
        # Exception text names hosts, ports and versions: only staff see it.
        body["error"] = {
            "code": ErrorCode.NOT_READY,
            "message": (
                "; ".join(f"{name}: {problem}" for name, problem in failing.items())
                if detailed
                else "Not ready: " + ", ".join(failing) + "."
            ),
            "retryable": ErrorCode.NOT_READY.retryable,
        }
        body["requestId"] = request_id_for(request)
    _readiness.note(frozenset(failing))
    response = JsonResponse(body, status=200 if not failing else 503)
    # Logged above, once per change: Django's request logger skips a response marked so (django.utils.log).
    response._has_been_logged = True
    return response


def _provider_failing() -> bool | None:
    try:
        return provider_errors.failing()
    except redis.RedisError:
        return None  # Redis cannot say: the runs in the database still can


def _provider(runs_waiting: tuple[int, int] | None, detailed: bool) -> dict:
    """The provider as the workers see it (the module's docstring)."""
    failing = _provider_failing()
    if failing:
        state = "failing"
    elif runs_waiting is None:
        state = "unknown"
    else:
        state = "backing_off" if any(runs_waiting) else "ok"
    if not detailed:
        return {"state": state}
    backing_off, parked = runs_waiting or (None, None)
    return {"state": state, "runsBackingOff": backing_off, "runsParked": parked}
