"""The conversation websocket: replay from the event log, then live events, with no gap or duplicate.

The live push is only a hint (channels-redis drops messages when a channel is full), so the
consumer trusts the database: any gap in `seq`, and the process's periodic check (`socket_catch_up`, one
query for all of its sockets), re-read the log. While Redis is unreachable the socket is still served, from
the log alone: a failing read of the live push waits and tries again instead of ending the socket, and the
periodic check outlives any error. However a socket ends (a close, a dropped connection, an exception), its
slot, its subscriptions and its group membership are given back, so a crash never locks its user out.
"""

import asyncio
import contextlib
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

from runtime import limits, selectors, subscribers
from runtime.outbound import conversation_group
from runtime.realtime import socket_catch_up
from runtime.realtime.live_push import live_push
from runtime.services.tombstones import DELETED_MESSAGE

# Application close code (4000-4999) for "too many open sockets": 4000 + the HTTP status it stands for.
RATE_LIMITED_CLOSE_CODE = 4429
# RFC 6455: a frame whose data the endpoint cannot take (not JSON, nested too deep to read).
INVALID_PAYLOAD_CLOSE_CODE = 1007
# Application close code for "the events after your `after` are no longer all kept" (4000 + 410 Gone): the log is a
# replay buffer (docs/data-lifecycle.md), so a client resuming from before what is kept reloads its snapshot (the
# history, whose `lastEventSeq` it resumes from) instead of waiting for seqs that compaction removed.
EVENTS_COMPACTED_CLOSE_CODE = 4410
# Application close code for "this conversation was deleted" (4000 + 404): sent after one `conversation.deleted` frame,
# at once for every open socket of it (docs/api.md); reconnecting is refused like any unknown conversation.
CONVERSATION_DELETED_CLOSE_CODE = 4404
# RFC 6455 (IANA registry): "Try Again Later", for a socket the server cannot serve for now (PostgreSQL restarting):
# the socket's 503, where an exception before accept would answer the handshake 500.
TRY_AGAIN_LATER_CLOSE_CODE = 1013
RELOAD_MESSAGE = {
    "type": "snapshot.reload",
    "reason": "events_compacted",
    "message": "Events after this point are no longer kept: reload the conversation and resume from its lastEventSeq.",
}


class ConversationConsumer(AsyncJsonWebsocketConsumer):
    joined = False
    ended = False
    # Set once the client was told to reload (or that the conversation was deleted): nothing more is sent.
    reloading = False
    page_visible = False

    async def __call__(self, scope, receive, send):
        """Channels' consumer loop (`AsyncConsumer.__call__`), with the live push read by `_receive_live` and an
        end that releases what the socket holds whichever way the loop stopped."""
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.channel_name = await self.channel_layer.new_channel()
        self.base_send = send
        try:
            await await_many_dispatch([receive, self._receive_live], self.dispatch)
        except StopConsumer:
            pass
        finally:
            await self.end()

    async def _receive_live(self):
        """The next live message; while Redis fails, the socket lives on the log and this keeps trying."""
        while True:
            try:
                return await self.channel_layer.receive(self.channel_name)
            except (RedisError, OSError):
                # Not joined any more: the catch-up loop polls the log and joins the group again, and its join says
                # whether the live push is away (`live_push`). A read failing alone is no outage: a connection
                # opened before Redis restarted fails once when Redis is back.
                self.joined = False
                await asyncio.sleep(settings.IMPO_SOCKET_POLL_WITHOUT_PUSH_SECONDS)

    async def connect(self):
        user = self.scope.get("user")
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        after = _after_parameter(self.scope)
        if user is None or not user.is_authenticated or after is None:
            await self.close()
            return
        try:
            owned = await database_sync_to_async(selectors.owns_conversation)(user, conversation_id)
        except DatabaseError:
            # Accepted first, as the cap's refusal is, so the client reads a passing outage, not a refusal.
            await self.accept()
            await self.close(code=TRY_AGAIN_LATER_CLOSE_CODE, reason="the service is briefly unavailable")
            return
        if not owned:
            await self.close()
            return
        slot = limits.websocket_slot(user)
        if not await asyncio.to_thread(slot.acquire):
            # A refusal before accept is a bare 403; accepting first lets the client read why and back off.
            await self.accept()
            await self.close(code=RATE_LIMITED_CLOSE_CODE, reason=slot.refusal().message)
            return
        self.slot = slot
        self.conversation_id = str(conversation_id)
        self.last_sent_seq = after
        self.subscriber_id = subscribers.new_subscriber_id()
        self.watched_submissions: set[str] = set()
        self.send_lock = asyncio.Lock()
        # Join the group before reading the log: an event committed during the replay then
        # arrives live and is skipped or sent by its seq, so nothing falls between the two.
        self.joined = await self._join()
        await self.accept()
        await self.catch_up()
        self.catch_up_loop = socket_catch_up.for_this_event_loop()
        self.catch_up_loop.add(self)

    async def disconnect(self, code):
        await self.end()

    async def end(self):
        """Gives back the slot, subscriptions and group membership; once, whichever way the socket ended."""
        if self.ended or not hasattr(self, "slot"):
            return
        self.ended = True
        if hasattr(self, "catch_up_loop"):
            ended = self.catch_up_loop.remove(self)
            if ended is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await ended
        await asyncio.to_thread(self.slot.release)
        if self.joined:
            with contextlib.suppress(RedisError, OSError):
                await self.channel_layer.group_discard(conversation_group(self.conversation_id), self.channel_name)
        for submission_id in self.watched_submissions:
            await asyncio.to_thread(subscribers.remove, submission_id, self.subscriber_id)
        if self.page_visible:
            await asyncio.to_thread(subscribers.hide_page, self.conversation_id, self.subscriber_id)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Clients listen (commands go through REST, where they are validated and made durable) and say whether their
        page is in view; a frame that is not JSON closes its own socket, without a traceback; the frame size is
        capped by the server."""
        try:
            await super().receive(text_data, bytes_data, **kwargs)
        except (ValueError, RecursionError):
            await self.close(code=INVALID_PAYLOAD_CLOSE_CODE)

    async def receive_json(self, content, **kwargs):
        """`{"type": "visibility", "visible": true|false}`: the page is in view or not (no push while it is,
        docs/design.md §10). Anything else is ignored: see `receive`."""
        if not isinstance(content, dict) or content.get("type") != "visibility":
            return
        visible = content.get("visible")
        if not isinstance(visible, bool) or visible == self.page_visible:
            return
        self.page_visible = visible
        change = subscribers.show_page if visible else subscribers.hide_page
        await asyncio.to_thread(change, self.conversation_id, self.subscriber_id)

    async def conversation_events(self, message):
        """The events of one write, in seq order: sent while each follows the last one sent (one already sent is
        skipped); a gap before one of them is filled from the log."""
        async with self.send_lock:
            if self.reloading:
                return
            for event in message["events"]:
                if event["seq"] == self.last_sent_seq + 1:
                    await self.send_json(event)
                    self.last_sent_seq = event["seq"]
                elif event["seq"] > self.last_sent_seq:
                    break
            else:
                return
        await self.catch_up()

    async def catch_up(self):
        """Sends every logged event after the last one sent, in order.

        Seqs are committed without holes, so a hole in what the log returns is events that compaction removed:
        the client is told to reload instead of being sent a hole it would wait on forever."""
        async with self.send_lock:
            while not self.reloading:
                batch = await database_sync_to_async(selectors.events_after)(self.conversation_id, self.last_sent_seq)
                for event in batch:
                    if event["seq"] != self.last_sent_seq + 1:
                        await self._ask_for_reload()
                        return
                    await self.send_json(event)
                    self.last_sent_seq = event["seq"]
                if len(batch) < selectors.EVENT_BATCH_SIZE:
                    return

    async def conversation_deleted(self, message):
        """The conversation was deleted (its push group's notice): told once, then closed with 4404."""
        await self.end_deleted(message["notice"])

    async def end_deleted(self, notice: dict = DELETED_MESSAGE):
        async with self.send_lock:
            if self.reloading:
                return
            self.reloading = True  # nothing more is sent on this socket
        await self.send_json(notice)
        await self.close(code=CONVERSATION_DELETED_CLOSE_CODE, reason="conversation deleted")

    async def _ask_for_reload(self):
        self.reloading = True
        await self.send_json(RELOAD_MESSAGE)
        await self.close(code=EVENTS_COMPACTED_CLOSE_CODE, reason="events compacted: reload the conversation")

    async def rejoin(self):
        self.joined = await self._join()

    async def renew_membership(self):
        """Joins the group again, which renews the membership: a process that died leaves its channels in the
        group, and they expire (`group_expiry`) unless renewed like this while their socket lives."""
        if self.joined:
            self.joined = await self._join()

    async def _join(self) -> bool:
        try:
            await self.channel_layer.group_add(conversation_group(self.conversation_id), self.channel_name)
        except (RedisError, OSError) as exc:
            live_push.failed(exc)
            return False
        live_push.succeeded()
        return True


def _after_parameter(scope) -> int | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after", ["0"])
    try:
        after = int(values[0])
    except ValueError:
        return None
    return after if after >= 0 else None
