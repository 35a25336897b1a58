"""Provider failures, counted in Redis per operation and kind, so every worker and web process adds to one count.

`/metrics` reads the counts; Prometheus turns them into rates. Each failure also marks the provider failing for
FAILING_SECONDS, which `/ready` reports: what any process saw of it lately, whether its run then waited in the
database's backoff or retried in the process (a followed turn's re-reads, a lookup, the sweeper's probe).

Counting must never get in the way of the call it
counts: Redis errors are logged and the count is skipped, and after one the counter rests a while, so an outage
of Redis does not add its timeouts to every failing provider call.
"""

import logging
import time
from functools import cache

import redis
from django.conf import settings

from rebyte.failures import ProviderError, Refused, failure_kind

logger = logging.getLogger(__name__)

REDIS_TIMEOUT_SECONDS = 0.5
REST_AFTER_REDIS_ERROR_SECONDS = 10.0
# Long enough to bridge the gaps between failing calls while every call fails (the sweeper probes once a pass),
# short enough that `/ready` says "ok" again seconds after they stop.
FAILING_SECONDS = 5.0

_resting_until = 0.0


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS)


def _key(name: str = "provider_errors") -> str:
    # Per queue, like the worker heartbeats: deployments (and test runs) sharing a Redis keep their own counts.
    return f"impo:{name}:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def record(error: ProviderError) -> None:
    """Counts one sorted failure; the gateway's `on_failure`."""
    global _resting_until
    if time.monotonic() < _resting_until:
        return
    try:
        pipeline = _redis(settings.REDIS_URL).pipeline(transaction=False)
        pipeline.hincrby(_key(), f"{error.operation}|{failure_kind(error)}", 1)
        if not isinstance(error, Refused):  # a refusal is an answer: the provider works
            pipeline.set(_key("provider_failing"), 1, px=int(FAILING_SECONDS * 1000))
        pipeline.execute()
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


def failing() -> bool:
    """Whether a provider call failed (not refused) in the last FAILING_SECONDS; raises redis.RedisError when Redis
    cannot say."""
    return bool(_redis(settings.REDIS_URL).exists(_key("provider_failing")))
