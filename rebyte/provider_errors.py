"""Provider failures, counted in Redis per operation and kind, so every worker and web process adds to one count.

`/metrics` reads the counts; Prometheus turns them into rates. Counting must never get in the way of the call it
counts: Redis errors are logged and the count is skipped, and after one the counter rests a while, so an outage
of Redis does not add its timeouts to every failing provider call.
"""

import logging
import time
from functools import cache

import redis
from django.conf import settings

from rebyte.failures import ProviderError, failure_kind

logger = logging.getLogger(__name__)

REDIS_TIMEOUT_SECONDS = 0.5
REST_AFTER_REDIS_ERROR_SECONDS = 10.0

_resting_until = 0.0


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS)


def _key() -> str:
    # Per queue, like the worker heartbeats: deployments (and test runs) sharing a Redis keep their own counts.
    return f"impo:provider_errors:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def record(error: ProviderError) -> None:
    """Counts one sorted failure; the gateway's `on_failure`."""
    global _resting_until
    if time.monotonic() < _resting_until:
        return
    try:
        _redis(settings.REDIS_URL).hincrby(_key(), f"{error.operation}|{failure_kind(error)}", 1)
    except redis.RedisError as exc:
        _resting_until = time.monotonic() + REST_AFTER_REDIS_ERROR_SECONDS
        logger.warning("could not count a provider failure: %s", exc)


def counts() -> dict[tuple[str, str], int]:
    """{(operation, kind): failures}; raises redis.RedisError when Redis cannot say."""
    raw = _redis(settings.REDIS_URL).hgetall(_key())
    found = {}
    for field, value in raw.items():
        operation, _, kind = field.decode().partition("|")
        found[(operation, kind)] = int(value)
    return found
