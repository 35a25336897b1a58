"""One catch-up loop per web process (per event loop) for all of its conversation websockets.

The live push is a hint, so an open socket must also notice events whose push was lost. A loop per socket made
that one query per socket per interval, which saturated the process's single database thread at a few hundred
sockets. Here each interval reads the newest `seq` of every watched conversation in ONE query, and only the
sockets that are behind read their gap; every 15 s (`IMPO_SOCKET_PRESENCE_SECONDS`) the subscriber counts and
connection slots of all sockets are refreshed with one query and one Redis round trip each, and each socket renews
its group membership (a process that dies leaves its channels in their groups until the membership expires:
`IMPO_CHANNEL_GROUP_EXPIRY_SECONDS`).
Started by the first socket, it ends with the last, and it outlives any error of PostgreSQL or Redis (logged),
so no socket goes silent for good.
"""

import asyncio
import logging
import time
import weakref
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from runtime import limits, selectors, subscribers

logger = logging.getLogger(__name__)


class WatchingSocket(Protocol):
    """What the loop needs of a socket (the conversation consumer)."""

    conversation_id: str
    last_sent_seq: int
    joined: bool
    slot: limits.Slot
    subscriber_id: str
    watched_submissions: set[str]
    page_visible: bool

    async def rejoin(self) -> None: ...

    async def renew_membership(self) -> None: ...

    async def catch_up(self) -> None: ...

    async def end_deleted(self) -> None: ...


class CatchUpLoop:
    def __init__(self) -> None:
        self.sockets: set[WatchingSocket] = set()
        self.task: asyncio.Task | None = None
        self.presence_refreshed_at = 0.0

    def add(self, socket: WatchingSocket) -> None:
        self.sockets.add(socket)
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run(), name="socket-catch-up")

    def remove(self, socket: WatchingSocket) -> asyncio.Task | None:
        """Forgets the socket; returns the loop's task, cancelled, when that was the last socket (to be awaited)."""
        self.sockets.discard(socket)
        if self.sockets or self.task is None:
            return None
        task, self.task = self.task, None
        task.cancel()
        return task

    async def _run(self) -> None:
        while True:
            # Without the live push (Redis down) the log is the only source: read it more often.
            live = all(socket.joined for socket in self.sockets)
            await asyncio.sleep(
                settings.IMPO_SOCKET_CATCH_UP_SECONDS if live else settings.IMPO_SOCKET_POLL_WITHOUT_PUSH_SECONDS
            )
            sockets = list(self.sockets)
            try:
                await self._send_what_was_missed(sockets)
            except Exception:
                logger.exception("catch-up of %d sockets failed; retrying", len(sockets))
            # Subscriber entries live 45 s, slots 60 s: refreshed every 15 s, two refreshes may fail before one lapses.
            if time.monotonic() - self.presence_refreshed_at < settings.IMPO_SOCKET_PRESENCE_SECONDS:
                continue
            self.presence_refreshed_at = time.monotonic()
            try:
                await self._refresh_presence(sockets)
            except Exception:
                logger.exception("refreshing %d sockets' subscriptions failed; retrying", len(sockets))

    @staticmethod
    async def _send_what_was_missed(sockets: list[WatchingSocket]) -> None:
        for socket in sockets:
            if not socket.joined:
                await socket.rejoin()
                if not socket.joined:
                    break  # Redis is still unreachable: one attempt a round, not one per socket
        conversation_ids = {socket.conversation_id for socket in sockets}
        latest = await database_sync_to_async(selectors.latest_event_seqs)(conversation_ids)
        # A deleted conversation is not in `latest`: its sockets close, if its push did not close them already.
        await asyncio.gather(*(socket.end_deleted() for socket in sockets if socket.conversation_id not in latest))
        behind = [socket for socket in sockets if latest.get(socket.conversation_id, 0) > socket.last_sent_seq]
        outcomes = await asyncio.gather(*(socket.catch_up() for socket in behind), return_exceptions=True)
        for socket, outcome in zip(behind, outcomes, strict=True):
            if isinstance(outcome, Exception):
                logger.warning("catch-up of conversation %s failed; retrying: %r", socket.conversation_id, outcome)

    async def _refresh_presence(self, sockets: list[WatchingSocket]) -> None:
        conversation_ids = {socket.conversation_id for socket in sockets}
        active = await database_sync_to_async(selectors.active_submission_ids_by_conversation)(conversation_ids)
        subscriptions = []
        for socket in sockets:
            watched = active.get(socket.conversation_id, set())
            socket.watched_submissions |= watched
            subscriptions += [(submission_id, socket.subscriber_id) for submission_id in watched]
        if subscriptions:
            await asyncio.to_thread(subscribers.refresh_many, subscriptions)
        # A socket closed meanwhile has released its slot: refreshing it would hold the place again.
        open_sockets = [socket for socket in sockets if socket in self.sockets]
        visible = [(socket.conversation_id, socket.subscriber_id) for socket in open_sockets if socket.page_visible]
        await asyncio.to_thread(subscribers.refresh_visible_pages, visible)
        await asyncio.to_thread(limits.refresh_slots, [socket.slot for socket in open_sockets])
        await asyncio.gather(*(socket.renew_membership() for socket in open_sockets))


_loops: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CatchUpLoop]" = weakref.WeakKeyDictionary()


def for_this_event_loop() -> CatchUpLoop:
    """The catch-up loop of the running event loop: one per web process (test clients may run several loops)."""
    running = asyncio.get_running_loop()
    loop = _loops.get(running)
    if loop is None:
        loop = _loops[running] = CatchUpLoop()
    return loop
