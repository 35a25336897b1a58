"""The base of the long-lived loop commands (the sweeper, the webhooks loop): a pass every interval, forever.

A loop is what recovers lost work, so an outage of its dependencies (the database, the broker, the provider) is
logged and waited out: it never ends the loop, and a broken connection is replaced on the next pass. SIGTERM or
SIGINT (a deployment's stop, honcho's Ctrl-C) ends it between passes, with status 0: a pass is left to finish, and
what it did not reach is the next start's work.
"""

import logging
import signal
import threading

from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)


class PeriodicLoopCommand(BaseCommand):
    """Subclasses name their `loop_name`, give `default_interval()` and do one pass in `run_pass()`."""

    loop_name = "loop"

    def default_interval(self) -> float:
        raise NotImplementedError

    def run_pass(self) -> None:
        raise NotImplementedError

    def wait_for_next_pass(self, stopping: threading.Event, interval: float) -> None:
        """Waits for the next pass: the interval, or less for a loop that can be told of new work (a doorbell)."""
        stopping.wait(interval)

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=self.default_interval())
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        stopping = threading.Event()
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop_signal, lambda signum, frame: stopping.set())
        logger.info("%s loop started: a pass every %.1f s", self.loop_name, interval)
        while not stopping.is_set():
            try:
                self.run_pass()
            except Exception:
                logger.exception("%s pass failed; trying again in %.1f s", self.loop_name, interval)
                connection.close()
            if once:
                return
            self.wait_for_next_pass(stopping, interval)
            if stopping.is_set():
                break
            close_old_connections()
        logger.info("%s loop stopped", self.loop_name)


def advance_each(ids, step, *, what: str) -> int:
    """A sweep's pass over a batch: `step(id)` for each id, returning how many of them it finished. A failure of
    one (the database, a bug) is logged and the others go on, so one bad row never starves the rest."""
    finished = 0
    for item_id in ids:
        try:
            finished += step(item_id)
        except Exception:
            logger.exception("%s %s failed; the next pass tries again", what, item_id)
    return finished
