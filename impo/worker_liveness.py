"""Worker liveness for `/ready`: each Celery worker keeps an expiring entry in Redis while it runs.

Entries are kept per queue (the queue a deployment's web processes send to), scored by the time they expire,
so a worker that is SIGKILLed ages out instead of counting as alive forever.
"""

import time
from functools import cache

import redis
from django.conf import settings

# `/ready` notices a dead worker within the TTL (docs/operations.md "Health and readiness"); a live one may miss two
# beats before it lapses.
HEARTBEAT_INTERVAL_SECONDS = 3.0
HEARTBEAT_TTL_SECONDS = 9.0


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)


def _key() -> str:
    return f"impo:workers:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def beat(worker_name: str) -> None:
    key = _key()
    now = time.time()
    with _redis(settings.REDIS_URL).pipeline() as pipe:
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zadd(key, {worker_name: now + HEARTBEAT_TTL_SECONDS})
        pipe.expire(key, int(HEARTBEAT_TTL_SECONDS))
        pipe.execute()


def stopped(worker_name: str) -> None:
    _redis(settings.REDIS_URL).zrem(_key(), worker_name)


def alive_count() -> int:
    """Workers that beat within the TTL; raises redis.RedisError when Redis cannot say."""
    return _redis(settings.REDIS_URL).zcount(_key(), time.time(), "+inf")


def redis_uptime_seconds() -> int:
    """How long Redis has run: heartbeats sent before a restart are gone, and may not all have come again yet."""
    return int(_redis(settings.REDIS_URL).info("server")["uptime_in_seconds"])
