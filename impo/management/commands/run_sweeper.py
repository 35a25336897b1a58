import logging

from django.conf import settings

from accounts import deletion_driver
from attachments import services as attachment_services
from core import telemetry
from core.loops import PeriodicLoopCommand
from rebyte.provider import provider_gateway
from runtime.execution import reconciliation, remote_deletes
from runtime.services import retention, sweeper

logger = logging.getLogger(__name__)

PRUNE_BATCHES_PER_SWEEP = 10


# At the roof because one pass composes every app's sweep, the accounts app's included (which sits above runtime).
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
        purged = remote_deletes.advance_conversations(provider_gateway())
        purged += remote_deletes.advance_retired_agents(provider_gateway())
        accounts_deleted = deletion_driver.advance_deletions(provider_gateway())
        # Last: the files purged conversations left decided go too; a store that is down leaves them decided, and
        # the next pass finishes them.
        orphans = attachment_services.sweep_orphans()
        counts = (report.rewoken, report.expired_leases, timed_out, settled, resumed, compacted.runs, purged)
        if any(counts) or accounts_deleted or orphans:
            logger.info(
                "sweep: re-woke %d queued and %d expired; denied %d approvals past their deadline;"
                " settled %d intents; resumed %d runs; compacted the deltas of %d runs (%d events);"
                " purged %d deleted conversations and retired agents; finished %d account deletions;"
                " deleted %d orphan uploads",
                report.rewoken,
                report.expired_leases,
                timed_out,
                settled,
                resumed,
                compacted.runs,
                compacted.events,
                purged,
                accounts_deleted,
                orphans,
            )
