"""Doorbells: a committing process tells a polling loop that work is waiting, so the loop's next pass starts now
instead of at the end of its interval.

A doorbell is a Redis list of at most one item. Ringing pushes an item and trims the list to one, so however many
commits ring it before the loop looks, it holds one ring; the loop waits on it with BLPOP. A ring is a hint like any
other (runtime/outbound.py sends them after commit): lost with Redis or with its process, the loop's own poll finds
the work at its next interval, so no loop may rely on the bell alone.
"""

import logging
import threading
import time

import redis
from django.conf import settings

from core.outages import Condition

logger = logging.getLogger(__name__)

# How long one BLPOP blocks, at most: a loop asked to stop (its event set) notices within this.
_WAIT_SLICE_SECONDS = 1.0

_unheard = Condition(
    logger,
    started="doorbells cannot be heard (the loops poll at their interval)",
    ended="doorbells are heard again",
)

_local = threading.local()


def _redis() -> redis.Redis:
    # One client per thread: a BLPOP holds its connection, and the push sender waits beside the webhooks loop.
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5)
    return client


def _key(name: str) -> str:
    return f"impo:doorbell:{name}"


def ring(name: str) -> None:
    """Rings `name`'s doorbell (a blocking Redis call: send it through the hint sender, after commit)."""
    with _redis().pipeline(transaction=False) as pipe:
        pipe.lpush(_key(name), 1)
        pipe.ltrim(_key(name), 0, 0)
        pipe.execute()


def wait(name: str, timeout: float, stop: threading.Event) -> bool:
    """Waits up to `timeout` seconds for `name`'s doorbell, or until `stop` is set; returns whether it rang.

    While Redis is away this waits out the timeout on `stop` alone: the loop goes on polling.
    """
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            # BLPOP's timeout is whole seconds before Redis 6; fractions are taken since 6.0.
            rang = _redis().blpop([_key(name)], timeout=min(left, _WAIT_SLICE_SECONDS)) is not None
        except redis.RedisError as exc:
            _unheard.failed(exc)
            stop.wait(left)
            return False
        _unheard.succeeded()
        if rang:
            return True
    return False
