import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand

from core import telemetry
from scheduling.worker import run_worker


class Command(BaseCommand):
    help = "Runs the scheduling Temporal worker (plan workflows and activities) and the plan discovery loop."

    def add_arguments(self, parser):
        parser.add_argument("--task-queue", default=None, help="Defaults to TEMPORAL_TASK_QUEUE.")
        parser.add_argument("--discovery-interval", type=float, default=None, help="Seconds between passes.")

    def handle(self, *args, task_queue: str | None, discovery_interval: float | None, **options):
        # Occurrences are admitted here: their runs' traces start in this process.
        telemetry.configure("impo-scheduler")
        asyncio.run(
            run_worker(
                task_queue=task_queue or settings.TEMPORAL_TASK_QUEUE,
                discovery_interval=discovery_interval or settings.IMPO_SCHEDULE_DISCOVERY_INTERVAL_SECONDS,
            )
        )
