import logging

from django.conf import settings

from impo.core import telemetry
from impo.core.loops import PeriodicLoopCommand
from rebyte.provider import provider_gateway
from runtime.execution import deletion, reconciliation
from runtime.services import retention, sweeper

logger = logging.getLogger(__name__)

PRUNE_BATCHES_PER_SWEEP = 10


class Command(PeriodicLoopCommand):
    help = (
        "Periodically re-wakes runs whose wake-up was lost or whose lease expired, denies tool approvals past"
        " their deadline, reconciles intents, compacts the event log past its retention window, and drives deletions."
    )
    loop_name = "sweep"

    def default_interval(self) -> float:
        return settings.IMPO_SWEEP_INTERVAL_SECONDS

    def handle(self, *args, **options):
        telemetry.configure("impo-sweeper")
        super().handle(*args, **options)

    def run_pass(self) -> None:
        report = sweeper.sweep_runs()
        timed_out = sweeper.expire_tool_approvals()
        settled, resumed = reconciliation.settle_reconciliations(provider_gateway())
        # Bounded per sweep, so a backlog (the first pass after deploying retention) never delays the passes above.
        compacted = retention.prune_events(max_batches=PRUNE_BATCHES_PER_SWEEP)
        purged = deletion.advance_all(provider_gateway())
        if report.rewoken or report.expired_leases or timed_out or settled or resumed or compacted.runs or purged:
            logger.info(
                "sweep: re-woke %d queued and %d expired; denied %d approvals past their deadline;"
                " settled %d intents; resumed %d runs; compacted the deltas of %d runs (%d events);"
                " purged %d deleted conversations",
                report.rewoken,
                report.expired_leases,
                timed_out,
                settled,
                resumed,
                compacted.runs,
                compacted.events,
                purged,
            )
