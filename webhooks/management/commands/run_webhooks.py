import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection

from webhooks import push_loop, services

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Turns new run events into webhook deliveries and re-wakes deliveries whose wake-up was lost; beside it,"
        " sends runs' notifications by Web Push (webhooks/push_loop.py)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.IMPO_WEBHOOK_POLL_SECONDS)
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        if once:
            push_loop.pass_once()
        else:
            push_loop.start(interval)
        while True:
            try:
                self._pass()
            except Exception:
                # Like the run sweeper: an outage of the database or broker is logged and waited out.
                logger.exception("webhooks pass failed; trying again in %.1f s", interval)
                connection.close()
            if once:
                return
            time.sleep(interval)
            close_old_connections()

    def _pass(self) -> None:
        collected = 0
        while True:  # a backlog (the loop was down) is drained now, a batch per transaction
            batch = services.collect_deliveries()
            collected += batch.deliveries
            if batch.events < services.COLLECT_BATCH:
                break
        rewoken = services.rewake_due_deliveries()
        if collected or rewoken:
            logger.info("webhooks: %d new deliveries; re-woke %d due", collected, rewoken)
