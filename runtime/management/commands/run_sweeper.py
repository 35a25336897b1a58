import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection

from impo import telemetry
from rebyte.provider import provider_gateway
from runtime import reconciliation, services
from runtime.services import retention

logger = logging.getLogger(__name__)

PRUNE_BATCHES_PER_SWEEP = 10


class Command(BaseCommand):
    help = (
        "Periodically re-wakes runs whose wake-up was lost or whose lease expired, denies tool approvals past"
        " their deadline, reconciles intents, and compacts the event log past its retention window."
    )

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.IMPO_SWEEP_INTERVAL_SECONDS)
        parser.add_argument("--once", action="store_true", help="Sweep once and exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        telemetry.configure("impo-sweeper")
        while True:
            try:
                self._sweep()
            except Exception:
                # The sweeper is what recovers lost work: a database or broker outage is logged and waited
                # out, never allowed to end the loop. A broken connection is replaced on the next pass.
                logger.exception("sweep failed; trying again in %.1f s", interval)
                connection.close()
            if once:
                return
            time.sleep(interval)
            close_old_connections()

    def _sweep(self) -> None:
        report = services.sweep_runs()
        timed_out = services.expire_tool_approvals()
        settled, resumed = reconciliation.settle_reconciliations(provider_gateway())
        # Bounded per sweep, so a backlog (the first pass after deploying retention) never delays the passes above.
        compacted = retention.prune_events(max_batches=PRUNE_BATCHES_PER_SWEEP)
        if report.rewoken or report.expired_leases or timed_out or settled or resumed or compacted.runs:
            logger.info(
                "sweep: re-woke %d queued and %d expired; denied %d approvals past their deadline;"
                " settled %d intents; resumed %d runs; compacted the deltas of %d runs (%d events)",
                report.rewoken,
                report.expired_leases,
                timed_out,
                settled,
                resumed,
                compacted.runs,
                compacted.events,
            )
