"""Who is watching a submission right now, and which conversations have a page in view, kept in Redis with
expiring entries.

A subscriber that dies without unsubscribing simply stops refreshing and ages out, so the count
never sticks at a value nobody is watching. The count is a courtesy, never a reason to fail: while
Redis is unreachable, refreshes are skipped and counts read as zero (and both are logged).
"""

import logging
import threading
import time
import uuid

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

SUBSCRIPTION_TTL_SECONDS = 45


_local = threading.local()


def _redis() -> redis.Redis:
    # One client per thread: the streams and sockets call in from executor threads, and a client shared
    # between them was seen to lose its connection under another thread's read (a closed-file error).
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = redis.Redis.from_url(settings.REDIS_URL)
    return client


def _key(submission_id) -> str:
    return f"impo:subscribers:{submission_id}"


def new_subscriber_id() -> str:
    return uuid.uuid4().hex


def refresh(submission_id, subscriber_id: str) -> None:
    key = _key(submission_id)
    try:
        with _redis().pipeline() as pipe:
            pipe.zadd(key, {subscriber_id: time.time() + SUBSCRIPTION_TTL_SECONDS})
            pipe.expire(key, SUBSCRIPTION_TTL_SECONDS)
            pipe.execute()
    except redis.RedisError as exc:
        logger.warning("could not refresh a subscriber of %s: %s", submission_id, exc)


def refresh_many(subscriptions) -> None:
    """Refreshes every (submission id, subscriber id) pair in one round trip: a process's sockets at once."""
    try:
        _add_expiring([(_key(submission_id), subscriber_id) for submission_id, subscriber_id in subscriptions])
    except redis.RedisError as exc:
        logger.warning("could not refresh %d subscribers: %s", len(subscriptions), exc)


def _add_expiring(entries: list[tuple[str, str]]) -> None:
    """(key, member) pairs, each member's entry renewed for the TTL, in one round trip; raises RedisError."""
    expires = time.time() + SUBSCRIPTION_TTL_SECONDS
    with _redis().pipeline(transaction=False) as pipe:
        for key, member in entries:
            pipe.zadd(key, {member: expires})
            pipe.expire(key, SUBSCRIPTION_TTL_SECONDS)
        pipe.execute()


def _live_counts(keys: list[str]) -> list[int]:
    """How many unexpired members each key has, in one round trip; raises RedisError."""
    now = time.time()
    with _redis().pipeline() as pipe:
        for key in keys:
            pipe.zcount(key, now, "+inf")
        return pipe.execute()


def remove(submission_id, subscriber_id: str) -> None:
    try:
        _redis().zrem(_key(submission_id), subscriber_id)
    except redis.RedisError as exc:
        logger.warning("could not remove a subscriber of %s (it ages out): %s", submission_id, exc)


def count(submission_ids) -> dict[str, int]:
    ids = [str(submission_id) for submission_id in submission_ids]
    if not ids:
        return {}
    try:
        counts = _live_counts([_key(submission_id) for submission_id in ids])
    except redis.RedisError as exc:
        logger.warning("subscriber counts unavailable: %s", exc)
        return dict.fromkeys(ids, 0)
    return dict(zip(ids, counts, strict=True))


# --- pages in view ---------------------------------------------------------------------------------------
# A conversation socket whose page reports itself visible (the web chat says so over its socket) is an owner
# looking at the conversation: the push sender stays quiet for it (docs/design.md §10). Same expiry as above, so a page
# whose process died stops counting; while Redis is unreachable no page counts as visible, and the owner is
# notified rather than left unaware.


def _visible_key(conversation_id) -> str:
    return f"impo:visible:{conversation_id}"


def show_page(conversation_id, socket_id: str) -> None:
    refresh_visible_pages([(conversation_id, socket_id)])


def refresh_visible_pages(pages) -> None:
    """(conversation id, socket id) pairs whose page is in view, refreshed in one round trip."""
    if not pages:
        return
    try:
        _add_expiring([(_visible_key(conversation_id), socket_id) for conversation_id, socket_id in pages])
    except redis.RedisError as exc:
        logger.warning("could not mark %d pages visible: %s", len(pages), exc)


def hide_page(conversation_id, socket_id: str) -> None:
    try:
        _redis().zrem(_visible_key(conversation_id), socket_id)
    except redis.RedisError as exc:
        logger.warning("could not mark a page of %s hidden (it ages out): %s", conversation_id, exc)


def conversations_in_view(conversation_ids) -> set[str]:
    """Those of the conversations with at least one page in view now; none while Redis is unreachable."""
    ids = [str(conversation_id) for conversation_id in conversation_ids]
    if not ids:
        return set()
    try:
        counts = _live_counts([_visible_key(conversation_id) for conversation_id in ids])
    except redis.RedisError as exc:
        logger.warning("pages in view unavailable (notifying as if none were): %s", exc)
        return set()
    return {conversation_id for conversation_id, seen in zip(ids, counts, strict=True) if seen}
