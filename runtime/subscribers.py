"""Who is watching a submission right now, kept in Redis with expiring entries.

A subscriber that dies without unsubscribing simply stops refreshing and ages out, so the count
never sticks at a value nobody is watching.
"""

import time
import uuid
from functools import cache

import redis
from django.conf import settings

SUBSCRIPTION_TTL_SECONDS = 45


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def _key(submission_id) -> str:
    return f"impo:subscribers:{submission_id}"


def new_subscriber_id() -> str:
    return uuid.uuid4().hex


def refresh(submission_id, subscriber_id: str) -> None:
    key = _key(submission_id)
    with _redis().pipeline() as pipe:
        pipe.zadd(key, {subscriber_id: time.time() + SUBSCRIPTION_TTL_SECONDS})
        pipe.expire(key, SUBSCRIPTION_TTL_SECONDS)
        pipe.execute()


def remove(submission_id, subscriber_id: str) -> None:
    _redis().zrem(_key(submission_id), subscriber_id)


def count(submission_ids) -> dict[str, int]:
    ids = [str(submission_id) for submission_id in submission_ids]
    if not ids:
        return {}
    now = time.time()
    with _redis().pipeline() as pipe:
        for submission_id in ids:
            pipe.zcount(_key(submission_id), now, "+inf")
        counts = pipe.execute()
    return dict(zip(ids, counts, strict=True))
