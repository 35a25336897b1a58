"""The one way anything leaves the database: after the transaction that justified it commits.

On-commit callbacks die with the process, so every message sent from here is a hint that a
periodic job can reproduce from the database (the sweeper re-wakes runs; websocket subscribers
re-read the event log when they see a gap in `seq`).
"""

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine

from django.db import transaction

from impo.celery import app
from runtime.models import Run

PUBLISH_TIMEOUT_SECONDS = 5.0


def send_after_commit(send: Callable[[], None]) -> None:
    # robust: a broker or Redis outage is logged, never raised into a request whose work is
    # already committed; the sweeper or a reader's gap check recovers the lost hint.
    transaction.on_commit(send, robust=True)


EXECUTE_RUN_TASK = "runtime.execute_run"


def wake_run(run_id, *, delay_seconds: float = 0) -> None:
    """Wakes a worker for the run after commit; `delay_seconds` for a run that must not start before then.

    Sent by task name: this module sits below the task (which drives runs) and must not import it.
    """
    countdown = max(0.0, delay_seconds)

    def send() -> None:
        try:
            app.send_task(EXECUTE_RUN_TASK, args=[str(run_id)], countdown=countdown or None)
        except Exception:
            # The broker is unreachable: mark the wake-up as never sent, so the sweeper's next pass sends it
            # again instead of waiting out its re-wake interval.
            Run.objects.filter(id=run_id).update(last_woken_at=None)
            raise

    send_after_commit(send)


def publish_events(conversation_id, wire_events: list[dict]) -> None:
    if not wire_events:
        return

    async def push_in_order():
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        group = conversation_group(conversation_id)
        for wire_event in wire_events:
            await layer.group_send(group, {"type": "conversation.event", "event": wire_event})

    send_after_commit(lambda: _publisher.run(push_in_order()))


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


class _PublisherLoop:
    """One event loop per process for channel-layer sends made from synchronous code.

    `async_to_sync` outside a running loop (a Celery worker, the sweeper) makes a new loop per call, and
    channels_redis opens a Redis connection per loop: about 4 ms per published event. A long-lived loop keeps
    one connection pool. It is created lazily and per pid, so a prefork child never inherits its parent's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None

    def run(self, coroutine: Coroutine) -> None:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())
        future.result(timeout=PUBLISH_TIMEOUT_SECONDS)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop = asyncio.new_event_loop()
                self._pid = os.getpid()
                threading.Thread(target=self._loop.run_forever, name="channel-layer-publisher", daemon=True).start()
            return self._loop


_publisher = _PublisherLoop()
