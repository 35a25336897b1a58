"""One heartbeat per worker process: every lease the process holds is extended in one statement per interval.

A run's driver holds its lease through `held(lease)`; the beat extends all of them at once, each fenced by its
own generation, and marks a lease it finds lost so that its driver stops at its next check (and a driver waiting
on its live stream is woken for it). Hundreds of runs in flight cost one thread and one statement per interval,
not a thread and a transaction each.
"""

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from runtime.services import claims

logger = logging.getLogger(__name__)

# Held by a statement that locks several of this process's runs at once (the beat, the group commit of their
# projections): two such statements of one process could lock the same runs in different orders and deadlock.
several_runs_statement = threading.Lock()


class HeldLease:
    """A lease in the process's heartbeat: `check()` raises LeaseLost once the beat found it taken over."""

    def __init__(self, lease: claims.Lease):
        self.lease = lease
        self.lost = threading.Event()
        self._on_lost: list[Callable[[], None]] = []

    def check(self) -> None:
        if self.lost.is_set():
            raise claims.LeaseLost(f"run {self.lease.run_id}: heartbeat found the lease taken over")

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Calls `callback` (from the heartbeat's thread) when the lease is found lost: wakes a waiting driver."""
        self._on_lost.append(callback)
        if self.lost.is_set():
            callback()

    def _mark_lost(self) -> None:
        self.lost.set()
        for callback in self._on_lost:
            callback()


class ProcessHeartbeat:
    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict[uuid.UUID, HeldLease] = {}
        self._thread: threading.Thread | None = None

    @contextmanager
    def held(self, lease: claims.Lease) -> Iterator[HeldLease]:
        """Keeps `lease` extended while the block runs. The claim set its expiry a whole lease ahead, and the beat
        comes every third of a lease, so a lease joining between two beats cannot lapse before the next."""
        held = HeldLease(lease)
        with self._lock:
            self._held[lease.run_id] = held
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat_forever, name="lease-heartbeat", daemon=True)
                self._thread.start()
        try:
            yield held
        finally:
            with self._lock:
                if self._held.get(lease.run_id) is held:
                    del self._held[lease.run_id]

    def beat(self) -> None:
        """Extends every lease held now in one statement; marks the ones found lost."""
        with self._lock:
            holding = list(self._held.values())
        if not holding:
            return
        try:
            with several_runs_statement:
                lost = claims.extend_leases([held.lease for held in holding])
        finally:
            # Back to the pool (or, in a process without one, closed): the beat holds nothing between beats.
            connection.close()
        with self._lock:
            # A run that ended (or parked) while the statement ran left its leased states: nothing was lost.
            lost_held = [h for h in holding if h.lease.run_id in lost and self._held.get(h.lease.run_id) is h]
        for held in lost_held:
            logger.warning("run %s: lease lost (generation %s)", held.lease.run_id, held.lease.generation)
            held._mark_lost()

    def _beat_forever(self) -> None:
        while True:
            time.sleep(settings.IMPO_RUN_LEASE_SECONDS / 3)
            try:
                self.beat()
            except Exception:
                # A database hiccup must not end the beat: every lease of the process would lapse mid-turn.
                logger.exception("lease heartbeat failed; trying again")


process_heartbeat = ProcessHeartbeat()
