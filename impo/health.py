"""Liveness (`/health`) and readiness (`/ready`: every dependency answers)."""

import asyncio

import psycopg
import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import JsonResponse
from temporalio.client import Client as TemporalClient

from impo import worker_liveness
from impo.core.authentication import request_user
from impo.core.error_codes import ErrorCode
from impo.core.middleware import request_id_for

READINESS_TIMEOUT_SECONDS = 2.0


def health(request):
    return JsonResponse({"status": "ok"})


def _database_ready() -> str | None:
    # A connection of its own, with a short timeout: the web process's pool would make a readiness probe
    # wait out its checkout timeout while PostgreSQL is down, and answer nothing in time.
    database = connection.settings_dict
    try:
        with psycopg.connect(
            dbname=database["NAME"],
            user=database["USER"],
            password=database["PASSWORD"] or None,
            host=database["HOST"] or None,
            port=database["PORT"] or None,
            connect_timeout=max(1, int(READINESS_TIMEOUT_SECONDS)),
        ) as probe:
            probe.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc)
    return None


def _redis_ready() -> str | None:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=READINESS_TIMEOUT_SECONDS).ping()
    except redis.RedisError as exc:
        return str(exc)
    return None


async def _connect_temporal() -> None:
    client = await TemporalClient.connect(settings.TEMPORAL_ADDRESS, namespace=settings.TEMPORAL_NAMESPACE)
    await client.service_client.check_health()


def _temporal_ready() -> str | None:
    try:
        asyncio.run(asyncio.wait_for(_connect_temporal(), READINESS_TIMEOUT_SECONDS))
    except (RuntimeError, TimeoutError, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None


def _workers_ready() -> str | None:
    try:
        alive = worker_liveness.alive_count()
    except redis.RedisError as exc:
        return str(exc)
    return None if alive else "no worker has sent a heartbeat recently"


def _staff(request) -> bool:
    try:
        user = request_user(request)
    except DatabaseError:
        return False  # with the database down nobody can be recognised, so nobody gets the detail
    return user is not None and user.is_staff


def ready(request):
    checks = {
        "database": _database_ready(),
        "redis": _redis_ready(),
        "temporal": _temporal_ready(),
        "workers": _workers_ready(),
    }
    failing = {name: problem for name, problem in checks.items() if problem is not None}
    body = {
        "status": "ready" if not failing else "unavailable",
        "checks": {name: ("ok" if problem is None else "failing") for name, problem in checks.items()},
    }
    if failing:
        # Exception text names hosts, ports and versions: only staff see it.
        detailed = _staff(request)
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
    return JsonResponse(body, status=200 if not failing else 503)
