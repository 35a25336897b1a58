import logging
import threading

from django.conf import settings

from core import doorbells
from core.loops import PeriodicLoopCommand
from runtime.outbound import WEBHOOKS_DOORBELL
from webhooks import push_loop, services

logger = logging.getLogger(__name__)


class Command(PeriodicLoopCommand):
    help = (
        "Turns new run events into webhook deliveries and re-wakes deliveries whose wake-up was lost; beside it,"
        " sends runs' notifications by Web Push (webhooks/push_loop.py)."
    )
    loop_name = "webhooks"

    def default_interval(self) -> float:
        return settings.IMPO_WEBHOOK_POLL_SECONDS

    def handle(self, *args, interval: float, once: bool, **options):
        if once:
            push_loop.pass_once()
        else:
            push_loop.start(interval)
        super().handle(*args, interval=interval, once=once, **options)

    def wait_for_next_pass(self, stopping: threading.Event, interval: float) -> None:
        # Rung after the commit of a run's event of a webhook type (runtime/events.py); the poll is the safety net.
        doorbells.wait(WEBHOOKS_DOORBELL, interval, stopping)

    def run_pass(self) -> None:
        collected = 0
        while True:  # a backlog (the loop was down) is drained now, a batch per transaction
            batch = services.collect_deliveries()
            collected += batch.deliveries
            if batch.events < services.COLLECT_BATCH:
                break
        rewoken = services.rewake_due_deliveries()
        if collected or rewoken:
            logger.info("webhooks: %d new deliveries; re-woke %d due", collected, rewoken)
