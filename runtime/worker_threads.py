"""The threads a worker keeps beside the run it drives: the lease's heartbeat, and the session's live stream.

Neither writes anything but the lease: the heartbeat extends it (and notices a takeover), the stream only wakes
the driver and carries text deltas into a queue.
"""

import contextvars
import logging
import queue
import threading

from django.conf import settings
from django.db import connection

from rebyte.client import LiveEvents, ProviderError, RebyteGateway
from runtime import services

logger = logging.getLogger(__name__)

LIVE_CONNECT_SECONDS = 5.0


class Heartbeat:
    """Keeps the lease alive while the provider or a device is slow, and notices a takeover."""

    def __init__(self, lease: services.Lease):
        self._lease = lease
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{lease.run_id}", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()

    def check(self) -> None:
        if self.lost.is_set():
            raise services.LeaseLost(f"run {self._lease.run_id}: heartbeat found the lease taken over")

    def _beat(self):
        try:
            while not self._stop.wait(settings.IMPO_RUN_LEASE_SECONDS / 3):
                try:
                    services.heartbeat(self._lease)
                except services.LeaseLost:
                    self.lost.set()
                    return
                except Exception:
                    # A database hiccup must not silently end the beat: the lease would lapse mid-turn.
                    logger.exception("run %s: heartbeat failed; trying again", self._lease.run_id)
                    connection.close()
        finally:
            connection.close()


class LiveStream:
    """The session's live events, read in a thread into a queue; reconnects while it is wanted.

    Only a wake-up and a source of deltas: whatever it misses, the next read of the truth brings.
    """

    def __init__(self, gateway: RebyteGateway, session_remote_id: str):
        self._gateway = gateway
        self._session = session_remote_id
        self.events: queue.Queue = queue.Queue()
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
        self.connected.wait(LIVE_CONNECT_SECONDS)

    def __exit__(self, *exc_info):
        with self._reading_lock:
            self._stop.set()
            if self._reading is not None:
                self._reading.interrupt()

    def _read(self):
        while not self._stop.is_set():
            try:
                with self._gateway.live_events(self._session) as events:
                    with self._reading_lock:
                        if self._stop.is_set():
                            return
                        self._reading = events
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
            self.connected.set()  # the caller must not wait for a stream that cannot be had
            self._stop.wait(settings.IMPO_PROVIDER_POLL_SECONDS)

    def drain(self, timeout: float) -> list:
        try:
            batch = [self.events.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                batch.append(self.events.get_nowait())
            except queue.Empty:
                return batch
