import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from rebyte.provider import provider_client
from rebyte.services import reconcile_open_intents
from runtime import services

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Periodically re-wakes runs whose wake-up was lost or whose lease expired, and reconciles intents."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.IMPO_SWEEP_INTERVAL_SECONDS)
        parser.add_argument("--once", action="store_true", help="Sweep once and exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        while True:
            report = services.sweep_runs()
            with provider_client() as client:
                settled = reconcile_open_intents(client)
            resumed = services.resume_reconciled_runs()
            if report.rewoken or report.expired_leases or settled or resumed:
                logger.info(
                    "sweep: re-woke %d queued and %d expired; settled %d intents; resumed %d runs",
                    report.rewoken,
                    report.expired_leases,
                    settled,
                    resumed,
                )
            if once:
                return
            time.sleep(interval)
