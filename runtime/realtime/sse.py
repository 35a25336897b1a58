"""`GET /api/v1/submissions/{id}/stream`: Server-Sent Events in the AI SDK UI Message Stream v1 format.

Each open rebuilds the whole current message from the event log, then follows new events. The
channel-layer push only says "look now": what is sent always comes from the database, so a dropped
push (or a Redis outage) costs at most one poll interval. Every read returns its pooled database
connection at once, so a waiting stream holds none. Closing the stream never cancels the run; a
stream that can no longer read the log ends with `error` and no `finish`, telling the client to reconcile.
"""

import asyncio
import contextlib
import json
import logging
import time

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError
from django.http import StreamingHttpResponse
from redis.exceptions import RedisError

from core.authentication import arequest_user
from core.error_codes import ErrorCode
from core.errors import ApplicationError, InvalidRequest, application_error_response, unauthorized
from core.views import parse_path_id
from runtime import limits, selectors, subscribers
from runtime.outbound import conversation_group
from runtime.realtime.ai_sdk_stream import UIMessageStream, compact
from runtime.realtime.live_push import live_push

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
# How a stream of a conversation deleted while it is open ends: this `error`, no `finish` (docs/api.md).
DELETED_ERROR = {"type": "error", "errorText": "This conversation was deleted."}
KEEPALIVE_SECONDS = 15.0


async def submission_stream(request, submission_id):
    user = await arequest_user(request)
    if user is None:
        return unauthorized(request)
    try:
        if request.method not in ("GET", "HEAD"):
            raise ApplicationError("Method not allowed.", code=ErrorCode.METHOD_NOT_ALLOWED)
        if request.GET:
            raise InvalidRequest(f"{sorted(request.GET)[0]}: Unknown query parameter.")
        submission_id = parse_path_id("submission_id", submission_id)
        submission = await database_sync_to_async(selectors.submission_for_owner)(user, submission_id)
    except ApplicationError as exc:
        return application_error_response(request, exc)
    slot = limits.stream_slot(user)
    if not await asyncio.to_thread(slot.acquire):
        return application_error_response(request, slot.refusal())
    response = StreamingHttpResponse(_sse(submission, slot), content_type="text/event-stream")
    response["x-vercel-ai-ui-message-stream"] = "v1"
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _frame(chunk: dict) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"


async def _sse(submission, slot: limits.Slot):
    submission_id = str(submission.id)
    stream = UIMessageStream(message_id=str(submission.assistant_message_id), submission_id=submission_id)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = conversation_group(submission.conversation_id)
    subscriber_id = subscribers.new_subscriber_id()
    try:
        async for frame in _follow(stream, layer, group, channel, submission_id, subscriber_id, slot):
            yield frame
    except DatabaseError:
        # The event log cannot be read any more. The run goes on; ending without `finish` is what tells
        # the client that the stream broke and that it must reconcile through the submission and history.
        logger.exception("stream of submission %s broke", submission_id)
        yield _frame({"type": "error", "errorText": "The stream broke; the run goes on. Reload to see it."})
    finally:
        with contextlib.suppress(RedisError, OSError):
            await layer.group_discard(group, channel)
        await asyncio.to_thread(subscribers.remove, submission_id, subscriber_id)
        await asyncio.to_thread(slot.release)
    yield "data: [DONE]\n\n"


async def _follow(stream: UIMessageStream, layer, group: str, channel: str, submission_id: str, subscriber_id, slot):
    """The whole message so far, then each new event's chunks, until the message finishes."""
    # Subscribe before the first read, so anything committed after it at least triggers a re-read.
    live = await _join(layer, group, channel)
    await asyncio.to_thread(subscribers.refresh, submission_id, subscriber_id)
    events = await database_sync_to_async(selectors.current_attempt_events)(submission_id)
    chunks = stream.start()
    for event in events:
        chunks += stream.feed(event)
    if not stream.finished:
        status = await database_sync_to_async(selectors.run_state_of)(submission_id)
        chunks.append(stream.status(status))
    for chunk in compact(chunks):
        yield _frame(chunk)
    last_seq = events[-1]["seq"] if events else 0
    last_keepalive = time.monotonic()
    while not stream.finished:
        if live:
            live, pushed = await _wait_for_push(layer, channel)
            if pushed is not None and pushed.get("type") == "conversation.deleted":
                yield _frame(DELETED_ERROR)
                return
        else:
            await asyncio.sleep(POLL_SECONDS)
            live = await _join(layer, group, channel)
        for event in await database_sync_to_async(selectors.submission_events_after)(submission_id, last_seq):
            last_seq = event["seq"]
            for chunk in stream.feed(event):
                yield _frame(chunk)
        if time.monotonic() - last_keepalive >= KEEPALIVE_SECONDS:
            last_keepalive = time.monotonic()
            await asyncio.to_thread(subscribers.refresh, submission_id, subscriber_id)
            await asyncio.to_thread(slot.refresh)
            if not await database_sync_to_async(selectors.submission_is_live)(submission_id):
                yield _frame(DELETED_ERROR)  # deleted, and its push was lost
                return
            yield ": keepalive\n\n"


async def _join(layer, group: str, channel: str) -> bool:
    """Joins the conversation's push group; False while Redis is unreachable (the stream then polls)."""
    try:
        await layer.group_add(group, channel)
    except (RedisError, OSError) as exc:
        live_push.failed(exc)
        return False
    live_push.succeeded()
    return True


async def _wait_for_push(layer, channel: str) -> tuple[bool, dict | None]:
    """Waits up to one poll interval for a push: whether the channel layer still works, and the push if one came."""
    try:
        return True, await asyncio.wait_for(layer.receive(channel), POLL_SECONDS)
    except TimeoutError:
        return True, None
    except (RedisError, OSError):
        # The stream polls and joins again, and its join says whether the live push is away (as a socket's does).
        return False, None
