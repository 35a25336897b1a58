"""A worker process's group commit: the mid-turn projections of all the runs it drives, written together.

Each run's driver hands over the reply text it read since its last projection (with the provider progress that
goes with it) and waits; one thread per process writes everything handed over in one transaction, each run fenced
by its own lease, while the next group gathers. No timer holds a projection back: a lone run's text is written at
once, and under load each transaction carries whatever came while the previous one committed. Hundreds of
streaming runs then cost a few statements per commit instead of a transaction of several statements each.

A run's end, its text before a call and everything else that changes the run stay in the driver's own fenced
transaction; a driver has at most one projection here at a time, so its events keep their order.
"""

import logging
import threading
import uuid
from dataclasses import dataclass, field

from django.db import connection, transaction

from core.database import release_connection
from rebyte import bindings
from rebyte.models import RemoteTurn
from runtime.execution.heartbeat import several_runs_statement
from runtime.services import claims, lifecycle, projection

logger = logging.getLogger(__name__)


@dataclass
class _Handed:
    projection: claims.LeasedOutput
    # (remote turn, turn id, {item id: (characters projected, completed)}), or None when no item moved.
    progress: tuple[RemoteTurn, str, dict] | None
    written: threading.Event = field(default_factory=threading.Event)
    view: lifecycle.FencedRun | None = None
    error: BaseException | None = None

    @property
    def run_id(self) -> uuid.UUID:
        return self.projection.lease.run_id


class GroupCommit:
    def __init__(self):
        self._handed: list[_Handed] = []
        self._arrived = threading.Condition()
        self._thread: threading.Thread | None = None
        self._writing = 0

    @property
    def waiting(self) -> int:
        """How many projections wait for the next group."""
        with self._arrived:
            return len(self._handed)

    @property
    def writing(self) -> int:
        """How many projections the group being written now holds (0 between groups)."""
        with self._arrived:
            return self._writing

    def project(
        self,
        lease: claims.Lease,
        outputs: list[projection.Output | projection.Progress],
        *,
        progress: tuple[RemoteTurn, str, dict] | None,
    ) -> lifecycle.FencedRun:
        """Writes the run's outputs (and the progress of its remote turn) with the process's next group; returns
        a read-only view of the run as that transaction locked it. Raises LeaseLost if the lease was taken over
        (nothing of it written), or what the write raised. Holds no database connection while it waits."""
        handed = _Handed(claims.LeasedOutput(lease, outputs), progress)
        with self._arrived:
            self._handed.append(handed)
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_forever, name="group-commit", daemon=True)
                self._thread.start()
            self._arrived.notify()
        release_connection()
        handed.written.wait()
        if handed.error is not None:
            raise handed.error
        if handed.view is None:
            raise claims.LeaseLost(f"run {lease.run_id}: generation {lease.generation} is no longer current")
        return handed.view

    def _write_forever(self) -> None:
        while True:
            with self._arrived:
                self._writing = 0
                while not self._handed:
                    self._arrived.wait()
                group, self._handed = self._handed, []
                self._writing = len(group)
            self._write(group)

    def _write(self, group: list[_Handed]) -> None:
        try:
            with several_runs_statement, transaction.atomic(durable=True):
                views = claims.project_outputs_together([handed.projection for handed in group])
                bindings.note_projected_together(
                    [handed.progress for handed in group if handed.progress and handed.run_id in views]
                )
        except Exception as exc:
            connection.close()
            if len(group) > 1:
                # One run's failure (or a deadlock, a dropped connection) must not fail every run of the group:
                # each is written alone, and only those that fail alone see their error.
                logger.warning("group commit of %d projections failed (%s); writing each alone", len(group), exc)
                for handed in group:
                    self._write([handed])
                return
            group[0].error = exc
            group[0].written.set()
            return
        if not self.waiting:
            connection.close()  # back to the pool: the thread holds none while it waits for the next group
        # else the next group is written at once on the same connection: while replies stream, the writer never
        # queues for the pool behind a burst of claims and input sends.
        for handed in group:
            handed.view = views.get(handed.run_id)
            handed.written.set()


group_commit = GroupCommit()
