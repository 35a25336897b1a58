"""The one way anything leaves the database: after the transaction that justified it commits.

On-commit callbacks die with the process, so every message sent from here is a hint that a
periodic job can reproduce from the database (the sweeper re-wakes runs; websocket subscribers
re-read the event log when they see a gap in `seq`).
"""

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor

from celery import current_app
from django.db import connection, transaction

from core import doorbells
from core.outages import Condition
from runtime.models import Run

logger = logging.getLogger(__name__)

# Logged once when hints stop leaving (Redis or the broker away) and once when they leave again (docs/edge.md).
_unsent_hints = Condition(
    logger,
    started="hints cannot be sent (the sweeper and readers recover them)",
    ended="hints are sent again",
)

PUBLISH_TIMEOUT_SECONDS = 5.0
# Hints waiting while Redis is slow or away; past this they are dropped (each is a hint, not the record).
MAX_BACKLOG = 10_000
# Pushes to different conversations in flight at once. One at a time, a worker streaming hundreds of replies
# queued its pushes for seconds: each waits on a few Redis round trips, and on the interpreter's lock after each.
PUSHES_IN_FLIGHT = 32
# How long a process that is exiting waits for the hints it handed over to leave (docs/design.md §1.5).
EXIT_FLUSH_SECONDS = 2.0


def send_after_commit(send: Callable[[], None]) -> None:
    # robust: a broker or Redis outage is logged, never raised into a request whose work is
    # already committed; the sweeper or a reader's gap check recovers the lost hint.
    transaction.on_commit(send, robust=True)


def send_hint_after_commit(send: Callable[[], None], *, delay_seconds: float = 0) -> None:
    """Sends a blocking hint (a broker message) from the process's sender after commit, `delay_seconds` later.

    A delay is kept in this process, never as a broker countdown: a countdown message sits unacknowledged in
    a worker until due, and the broker's restore of such messages when Redis drops ended the worker. A delayed
    hint lost with its process is re-sent by the periodic pass that owns its table (the sweeper, the webhooks loop).
    """
    send_after_commit(lambda: _sender.send(send, delay_seconds=max(0.0, delay_seconds)))


def send_task_after_commit(
    task_name: str, object_id, *, mark_unsent: Callable[[], object], delay_seconds: float = 0
) -> None:
    """Wakes a worker for one row (a Celery task by name, its id the argument) after commit, `delay_seconds` later.

    If the broker is unreachable, `mark_unsent` records on the row that the wake-up never left, so the periodic
    pass that owns the row sends it again at once instead of waiting out its re-wake interval.
    """

    def send() -> None:
        try:
            current_app.send_task(task_name, args=[str(object_id)])
        except Exception:
            try:
                mark_unsent()
            finally:
                connection.close()  # the sender's thread keeps no connection between hints
            raise

    send_hint_after_commit(send, delay_seconds=delay_seconds)


EXECUTE_RUN_TASK = "runtime.execute_run"

# The loops a commit may ring for (core/doorbells.py): the push sender, for a new notification; the webhooks loop,
# for a new event of a webhook type.
PUSH_DOORBELL = "push"
WEBHOOKS_DOORBELL = "webhooks"


def ring_after_commit(doorbell: str) -> None:
    """Rings the loop's doorbell after commit, so it takes what this transaction wrote now rather than at its next
    poll (which still finds it if the ring is lost)."""
    send_hint_after_commit(lambda: doorbells.ring(doorbell))


def wake_run(run_id, *, delay_seconds: float = 0) -> None:
    """Wakes a worker for the run after commit; `delay_seconds` for a run that must not start before then.

    Sent by task name: this module sits below the task (which drives runs) and must not import it. The sweeper
    re-sends a wake-up that never left.
    """
    send_task_after_commit(
        EXECUTE_RUN_TASK,
        run_id,
        mark_unsent=lambda: Run.objects.filter(id=run_id).update(last_woken_at=None),
        delay_seconds=delay_seconds,
    )


def publish_events(conversation_id, wire_events: list[dict]) -> None:
    publish_events_together({conversation_id: wire_events})


def publish_events_together(wire_events_of: dict) -> None:
    """After commit, the events of one write ({conversation id: wire events in seq order}) to each conversation's
    sockets: one channel-layer message per conversation, all sent in one call (a group commit's projections
    carry many conversations; pushed one at a time, the push was most of a streamed delta's cost)."""
    messages = {
        conversation_group(conversation_id): {"type": "conversation.events", "events": wire_events}
        for conversation_id, wire_events in wire_events_of.items()
        if wire_events
    }
    if messages:
        _push_after_commit(messages)


def publish_deleted(conversation_id, notice: dict) -> None:
    """Tells the conversation's open sockets and streams that it was deleted (a hint: they also find it out from
    the database, the sockets in their periodic check and the streams at their keepalive)."""
    _push_after_commit({conversation_group(conversation_id): {"type": "conversation.deleted", "notice": notice}})


def _push_after_commit(messages: dict) -> None:
    """{group: message}, sent after commit in one channel-layer call, in order behind earlier pushes to any of them."""

    async def push():
        from channels.layers import get_channel_layer

        await get_channel_layer().send_to_groups(messages)

    send_after_commit(lambda: _sender.send(push(), lanes=tuple(messages)))


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


class HintSender:
    """One thread and event loop per process that sends the hints (wake-ups and channel-layer pushes); the
    committing thread never waits for them.

    Waiting there held a request, a claim or a projection for a broker round trip per hint, and in a web process
    (a fresh thread per request under ASGI) rebuilt the Celery and Redis clients each thread keeps. Here they
    live as long as the process. `async_to_sync` outside a running loop would also make a new loop, and
    channels_redis a new connection, per call. Hints are taken in the order they were handed over. A wake-up (a
    blocking call) is sent before the next hint is taken, so a run's wake-up still leaves before the push that
    announces it. A push is started and waits only for the earlier pushes of its own `lanes` (the conversations'
    groups it sends to), up to PUSHES_IN_FLIGHT at once. The loop is created lazily and per pid, so a prefork
    child never inherits its parent's.

    The thread is a daemon, so an exiting process does not wait for it unless asked: `flush` (run at exit) waits a
    bounded time for the hints handed over so far, so a process that commits and then stops (a management command,
    a web process at a deploy, a worker's warm shutdown) still wakes what it committed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._hints: asyncio.Queue | None = None
        self._pid: int | None = None
        # Hints taken into the queue and not yet sent or failed; changed on the loop's thread, read by `flush`.
        self._unsent = 0
        self._all_sent = threading.Condition()

    def send(
        self, hint: Coroutine | Callable[[], None], *, lanes: tuple[str, ...] = (), delay_seconds: float = 0
    ) -> None:
        loop, hints = self._running_loop()
        if delay_seconds:
            loop.call_soon_threadsafe(loop.call_later, delay_seconds, self._enqueue, hints, hint, lanes)
        else:
            loop.call_soon_threadsafe(self._enqueue, hints, hint, lanes)

    def flush(self, timeout: float) -> bool:
        """Waits, at most `timeout` seconds, until every hint handed over so far has been sent (or has failed);
        returns whether they all went. A delayed hint not yet due is not waited for: the periodic pass that owns its
        table sends it again."""
        with self._lock:
            loop = self._loop if self._pid == os.getpid() else None
        if loop is None or not loop.is_running():
            return True
        deadline = time.monotonic() + timeout
        handed_over = threading.Event()
        # Behind every hint handed over before it (the loop runs its callbacks in order): once it ran, they are all
        # counted in `_unsent`.
        loop.call_soon_threadsafe(handed_over.set)
        if not handed_over.wait(timeout):
            return False
        with self._all_sent:
            return self._all_sent.wait_for(lambda: self._unsent == 0, max(0.0, deadline - time.monotonic()))

    def _enqueue(self, hints: asyncio.Queue, hint: Coroutine | Callable[[], None], lanes: tuple[str, ...]) -> None:
        try:
            hints.put_nowait((hint, lanes))
        except asyncio.QueueFull:
            if asyncio.iscoroutine(hint):
                hint.close()
            logger.warning("%d hints waiting to be sent; dropped one (the sweeper or readers recover it)", MAX_BACKLOG)
            return
        with self._all_sent:
            self._unsent += 1

    def _done(self) -> None:
        with self._all_sent:
            self._unsent -= 1
            if self._unsent == 0:
                self._all_sent.notify_all()

    async def _send_hints(self, hints: asyncio.Queue) -> None:
        in_flight = asyncio.Semaphore(PUSHES_IN_FLIGHT)
        # Each lane's last push, which the next one of the lane waits for; it also keeps the task alive (the loop
        # holds only weak references to tasks), as each earlier one is kept by the push waiting for it.
        last_of_lane: dict[str, asyncio.Task] = {}

        def pushed(task: asyncio.Task, lanes: tuple[str, ...]) -> None:
            for lane in lanes:
                if last_of_lane.get(lane) is task:
                    del last_of_lane[lane]
            in_flight.release()
            self._done()

        while True:
            hint, lanes = await hints.get()
            if not asyncio.iscoroutine(hint):
                await HintSender._sent(asyncio.get_running_loop().run_in_executor(None, hint))
                self._done()
                continue
            await in_flight.acquire()
            earlier = {last_of_lane[lane] for lane in lanes if lane in last_of_lane}
            task = asyncio.create_task(HintSender._push(hint, after=earlier))
            for lane in lanes:
                last_of_lane[lane] = task
            task.add_done_callback(lambda done, lanes=lanes: pushed(done, lanes))

    @staticmethod
    async def _push(push: Coroutine, *, after: set[asyncio.Task]) -> None:
        if after:
            await asyncio.wait(after)  # the lanes' previous pushes, sent or failed: a later one never overtakes them
        await HintSender._sent(asyncio.wait_for(push, PUBLISH_TIMEOUT_SECONDS))

    @staticmethod
    async def _sent(sending) -> None:
        try:
            await sending
        except Exception as exc:
            _unsent_hints.failed(exc)
        else:
            _unsent_hints.succeeded()

    def _running_loop(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Queue]:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                # Blocking sends (and the ORM, which refuses to run beside a loop) on one thread of their own.
                loop.set_default_executor(ThreadPoolExecutor(max_workers=1, thread_name_prefix="hint-sender-sync"))
                hints = asyncio.Queue(maxsize=MAX_BACKLOG)
                loop.create_task(self._send_hints(hints))
                threading.Thread(target=loop.run_forever, name="hint-sender", daemon=True).start()
                self._loop, self._hints, self._pid = loop, hints, os.getpid()
            return self._loop, self._hints


_sender = HintSender()


def flush_hints(timeout: float = EXIT_FLUSH_SECONDS) -> bool:
    """Sends what this process handed over before it goes (bounded: a broker or Redis away costs at most `timeout`).
    Run at every normal exit; a prefork worker's child, which leaves without atexit, calls it itself."""
    return _sender.flush(timeout)


# At exit, before the interpreter joins its threads' executors: once it has, the sender's executor refuses the
# blocking hints (the wake-ups) still queued. `threading` runs these in reverse order of registration, and
# concurrent.futures registered its own when this module imported it, so this one runs first.
threading._register_atexit(flush_hints)
