"""The thread a worker keeps beside each run it drives: the session's live stream (the process's one heartbeat
is `runtime.execution.heartbeat`).

It writes nothing: it only wakes the driver and carries text deltas into a queue.
"""

import contextvars
import logging
import queue
import threading
import time

from django.conf import settings

from core.database import release_connection
from rebyte.client import LiveEvents, RebyteGateway
from rebyte.failures import ProviderError

logger = logging.getLogger(__name__)

LIVE_CONNECT_SECONDS = 5.0
# An open stream brings the turn's every change and asks for the truth at each end: while it is open, only a longer
# quiet sends the driver for the truth (hundreds of runs each re-reading their turn twice a second while a model
# thinks would be most of a worker's work).
QUIET_OPEN_STREAM_SECONDS = 2.0


def pause(seconds: float) -> None:
    """A worker's wait between two polls, holding no database connection."""
    release_connection()
    time.sleep(seconds)


class _StreamEnded:
    """Queued when a stream the reader had open ends: the deltas after it come from another stream, which did not see
    their items start (nor the deltas in between), so they cannot be placed on what came before."""

    type = "impo.live_stream.ended"


STREAM_ENDED = _StreamEnded()


class LiveStream:
    """The session's live events, read in a thread into a queue; reconnects while it is wanted.

    Only a wake-up and a source of deltas: whatever it misses, the next read of the truth brings. `created`, the
    session's own stream from its creation (a streamed create), is read first: it carries the first turn from its
    start. Once it ends, the reader goes on with the live stream like any.
    """

    def __init__(self, gateway: RebyteGateway, session_remote_id: str, *, created: LiveEvents | None = None):
        self._gateway = gateway
        self._session = session_remote_id
        self._created = created
        self.events: queue.Queue = queue.Queue()
        self._woken = threading.Event()
        self.connected = threading.Event()
        # Set while the stream is open (`connected` is also set when it could not be had).
        self.open = threading.Event()
        self._stop = threading.Event()
        # The stream being read, interrupted when the driver leaves (a quiet stream would hold its thread and
        # connection until the session's next event).
        self._reading: LiveEvents | None = None
        self._reading_lock = threading.Lock()
        # The reader runs in the caller's context, so its provider spans belong to the run's trace.
        reader = contextvars.copy_context().run
        self._thread = threading.Thread(
            target=reader, args=(self._read,), name=f"live-{session_remote_id}", daemon=True
        )

    def __enter__(self):
        self._thread.start()
        return self

    def wait_connected(self) -> None:
        release_connection()
        self.connected.wait(LIVE_CONNECT_SECONDS)

    def quiet_seconds(self) -> float:
        """How long the stream may stay quiet before the driver reads the truth."""
        return QUIET_OPEN_STREAM_SECONDS if self.open.is_set() else settings.IMPO_PROVIDER_POLL_SECONDS

    def wake(self) -> None:
        """Ends a `drain` waiting now (or the next one) early, with nothing: the driver has something to check."""
        self._woken.set()
        self.events.put(None)

    def __exit__(self, *exc_info):
        with self._reading_lock:
            self._stop.set()
            if self._reading is not None:
                self._reading.interrupt()

    def _read(self):
        try:
            while not self._stop.is_set():
                opened = False
                try:
                    stream, self._created = self._created or self._gateway.live_events(self._session), None
                    with stream as events:
                        with self._reading_lock:
                            if self._stop.is_set():
                                return
                            self._reading = events
                        opened = True
                        self.open.set()
                        self.connected.set()
                        for event in events:
                            if self._stop.is_set():
                                return
                            self.events.put(event)
                except ProviderError as exc:
                    logger.info("live stream of %s broke: %s", self._session, exc)
                finally:
                    with self._reading_lock:
                        self._reading = None
                    self.open.clear()
                    if opened and not self._stop.is_set():
                        self.events.put(STREAM_ENDED)
                self.connected.set()  # the caller must not wait for a stream that cannot be had
                self._stop.wait(settings.IMPO_PROVIDER_POLL_SECONDS)
        finally:
            if self._created is not None:  # left before it was read
                self._created.finish()

    def drain(self, timeout: float, *, gather: bool = False) -> list:
        """The events that came, waiting up to `timeout` for the first (holding no database connection).

        With `gather` (the driver holds text until its window ends), waits the whole `timeout` unless woken, and
        takes everything that came meanwhile: one wake-up of the driver per window, not one per delta."""
        release_connection()
        if gather:
            self._woken.wait(timeout)
        self._woken.clear()
        try:
            batch = [self.events.get(block=not gather, timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                batch.append(self.events.get_nowait())
            except queue.Empty:
                return [event for event in batch if event is not None]
