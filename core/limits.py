"""Per-user limits counted in Redis, so every web process sees the same numbers.

Three shapes: a sliding-window rate (`hit`), a count of concurrent holders whose slots expire unless refreshed
(`acquire`/`refresh`/`release`, so a process that dies never leaks a slot for long), and a failure counter
(`failures_blocked`/`record_failure`/`clear_failures`, for login). The scripts read Redis's own clock, so web
processes with skewed clocks agree.

When Redis cannot be reached, each caller decides deliberately: admission, streams and websockets fail open
(the database's cap on active runs still bounds paid work, and refusing every message during a Redis blip
would be an outage of its own), login fails closed (password guessing is exactly what the throttle stops).
The `LimitsUnavailable` exception is how that choice reaches the caller; nothing here answers a 500.
"""

import hashlib
import logging
import uuid
from dataclasses import dataclass
from functools import cache

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

# A limit check sits in front of every admission: a Redis that stops answering must not hold requests.
REDIS_TIMEOUT_SECONDS = 0.5

_NOW_MS = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)"

# KEYS[1]: sorted set of hit ids scored by time. ARGV: window ms, limit, hit id. Returns -1 when counted now, -2
# when a hit of that id is already in the window (counted once), else the ms until the oldest hit leaves it.
_HIT = f"""{_NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
    return -2
end
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('ZADD', KEYS[1], now, ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    return -1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tonumber(oldest[2]) + tonumber(ARGV[1]) - now
"""

# KEYS[1]: sorted set of holders scored by the time their slot expires. ARGV: slot ttl ms, limit, holder id.
# A holder already present is refreshed whatever the count. Returns 1 when held, 0 when full.
_ACQUIRE = f"""{_NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    return 1
end
return 0
"""

# KEYS[1]: failure counter. ARGV: window ms. The window starts at the first failure.
_FAIL = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count
"""


class LimitsUnavailable(Exception):
    """Redis did not answer a limit check; the caller fails open or closed, as it documents."""


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS)


def _client() -> redis.Redis:
    return _redis(settings.REDIS_URL)


def redis_client() -> redis.Redis:
    """This process's short-timeout client of the shared Redis, for other small per-request lookups (token cache)."""
    return _client()


def _key(limit: str, identity) -> str:
    # User ids are unique only within one database: deployments (and test sessions) sharing a Redis must not
    # share counters.
    return f"impo:limits:{settings.DATABASES['default']['NAME']}:{limit}:{identity}"


def _call(script: str, key: str, *args):
    try:
        return _client().eval(script, 1, key, *args)
    except redis.RedisError as exc:
        raise LimitsUnavailable(str(exc)) from exc


@dataclass(frozen=True)
class Hit:
    counted: bool  # this call added the hit (False: already in the window under its name, or refused)
    retry_after: float | None  # when refused, the seconds until one more fits


def hit(limit: str, identity, *, allowed: int, window_seconds: float, member: str | None = None) -> Hit:
    """Counts one hit among at most `allowed` per window.

    `member` names the hit: a hit of a name already in the window is not counted again (and not refused), and
    `release` can take it back."""
    wait_ms = _call(_HIT, _key(limit, identity), int(window_seconds * 1000), allowed, member or uuid.uuid4().hex)
    if wait_ms < 0:
        return Hit(counted=wait_ms == -1, retry_after=None)
    return Hit(counted=False, retry_after=max(wait_ms, 1) / 1000)


def acquire(limit: str, identity, holder: str, *, allowed: int, ttl_seconds: float) -> bool:
    """Takes (or refreshes) `holder`'s slot among at most `allowed`; False when they are all taken."""
    return bool(_call(_ACQUIRE, _key(limit, identity), int(ttl_seconds * 1000), allowed, holder))


def acquire_many(slots, *, ttl_seconds: float) -> None:
    """Refreshes many holders' slots, (limit, identity, holder, allowed) each, in one round trip."""
    acquire_script = _client().register_script(_ACQUIRE)
    try:
        with _client().pipeline(transaction=False) as pipe:
            for limit, identity, holder, allowed in slots:
                arguments = [int(ttl_seconds * 1000), allowed, holder]
                acquire_script(keys=[_key(limit, identity)], args=arguments, client=pipe)
            pipe.execute()
    except redis.RedisError as exc:
        raise LimitsUnavailable(str(exc)) from exc


def release(limit: str, identity, holder: str) -> None:
    try:
        _client().zrem(_key(limit, identity), holder)
    except redis.RedisError as exc:
        # The slot ages out by itself.
        logger.warning("could not release a %s slot: %s", limit, exc)


def failure_key(*parts: str) -> str:
    """A fixed-length identity for free text (a username as typed, an address)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def failures_blocked(limit: str, identity, *, allowed: int) -> float | None:
    """None while fewer than `allowed` failures are on record, else the seconds until the record expires."""
    key = _key(limit, identity)
    try:
        with _client().pipeline() as pipe:
            count, ttl_ms = pipe.get(key).pttl(key).execute()
    except redis.RedisError as exc:
        raise LimitsUnavailable(str(exc)) from exc
    if count is None or int(count) < allowed:
        return None
    return max(ttl_ms, 1000) / 1000


def record_failure(limit: str, identity, *, window_seconds: float) -> None:
    _call(_FAIL, _key(limit, identity), int(window_seconds * 1000))


def clear_failures(limit: str, identity) -> None:
    try:
        _client().delete(_key(limit, identity))
    except redis.RedisError as exc:
        raise LimitsUnavailable(str(exc)) from exc
