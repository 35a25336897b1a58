"""The base of the long-lived loop commands (the sweeper, the webhooks loop): a pass every interval, forever.

A loop is what recovers lost work, so an outage of its dependencies (the database, the broker, the provider) is
logged and waited out: it never ends the loop, and a broken connection is replaced on the next pass.
"""

import logging
import time

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

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=self.default_interval())
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        while True:
            try:
                self.run_pass()
            except Exception:
                logger.exception("%s pass failed; trying again in %.1f s", self.loop_name, interval)
                connection.close()
            if once:
                return
            time.sleep(interval)
            close_old_connections()
