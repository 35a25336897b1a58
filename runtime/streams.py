"""`GET /api/v1/submissions/{id}/stream`: Server-Sent Events in the AI SDK UI Message Stream v1 format.

Each open rebuilds the whole current message from the event log, then follows new events. The
channel-layer push only says "look now": what is sent always comes from the database, so a dropped
push costs at most one poll interval. Closing the stream never cancels the run.
"""

import asyncio
import contextlib
import json
import logging
import time

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError
from django.http import JsonResponse, StreamingHttpResponse
from rest_framework.authtoken.models import Token

from impo.errors import ApplicationError, InvalidRequest, error_body
from impo.views import parse_path_id
from runtime import selectors, subscribers
from runtime.outbound import conversation_group
from runtime.ui_stream import UIMessageStream, compact

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0


async def submission_stream(request, submission_id):
    user = await _authenticated_user(request)
    if user is None:
        return JsonResponse(error_body(request, "unauthorized", "Authentication required."), status=401)
    try:
        if request.GET:
            raise InvalidRequest(f"{sorted(request.GET)[0]}: Unknown query parameter.")
        submission_id = parse_path_id("submission_id", submission_id)
        submission = await sync_to_async(selectors.submission_for_owner)(user, submission_id)
    except ApplicationError as exc:
        return JsonResponse(error_body(request, exc.code, exc.message), status=exc.status)
    response = StreamingHttpResponse(_sse(submission), content_type="text/event-stream")
    response["x-vercel-ai-ui-message-stream"] = "v1"
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def _authenticated_user(request):
    authorization = request.headers.get("Authorization", "")
    if authorization.startswith("Bearer "):
        key = authorization.removeprefix("Bearer ").strip()
        token = await Token.objects.select_related("user").filter(key=key, user__is_active=True).afirst()
        return token.user if token else None
    user = await request.auser()
    return user if user.is_authenticated else None


def _frame(chunk: dict) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"


async def _sse(submission):
    submission_id = str(submission.id)
    stream = UIMessageStream(message_id=str(submission.assistant_message_id), submission_id=submission_id)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = conversation_group(submission.conversation_id)
    subscriber_id = subscribers.new_subscriber_id()
    # Subscribe before the first read, so anything committed after it at least triggers a re-read.
    await layer.group_add(group, channel)
    try:
        async for frame in _follow(stream, layer, channel, submission_id, subscriber_id):
            yield frame
    except DatabaseError:
        # The event log cannot be read any more. The run goes on; ending without `finish` is what tells
        # the client that the stream broke and that it must reconcile through the submission and history.
        logger.exception("stream of submission %s broke", submission_id)
        yield _frame({"type": "error", "errorText": "The stream broke; the run goes on. Reload to see it."})
    finally:
        await layer.group_discard(group, channel)
        await asyncio.to_thread(subscribers.remove, submission_id, subscriber_id)
    yield "data: [DONE]\n\n"


async def _follow(stream: UIMessageStream, layer, channel, submission_id: str, subscriber_id: str):
    """The whole message so far, then each new event's chunks, until the message finishes."""
    await asyncio.to_thread(subscribers.refresh, submission_id, subscriber_id)
    events = await sync_to_async(selectors.submission_events_after)(submission_id, 0)
    chunks = stream.start()
    for event in events:
        chunks += stream.feed(event)
    if not stream.finished:
        status = await sync_to_async(selectors.run_state_of)(submission_id)
        chunks.append(stream.status(status))
    for chunk in compact(chunks):
        yield _frame(chunk)
    last_seq = events[-1]["seq"] if events else 0
    last_keepalive = time.monotonic()
    while not stream.finished:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), POLL_SECONDS)
        for event in await sync_to_async(selectors.submission_events_after)(submission_id, last_seq):
            last_seq = event["seq"]
            for chunk in stream.feed(event):
                yield _frame(chunk)
        if time.monotonic() - last_keepalive >= KEEPALIVE_SECONDS:
            last_keepalive = time.monotonic()
            await asyncio.to_thread(subscribers.refresh, submission_id, subscriber_id)
            yield ": keepalive\n\n"
