from django.core.management.base import BaseCommand

from runtime.services import retention


class Command(BaseCommand):
    help = (
        "One retention pass over the event log: removes the text.delta events of runs settled longer than"
        " IMPO_EVENT_RETENTION_SECONDS ago, in small batches (safe beside the sweeper and on several machines)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=retention.COMPACT_BATCH, help="Runs per transaction.")

    def handle(self, *args, batch: int, **options):
        compacted = retention.prune_events(batch=batch)
        self.stdout.write(
            f"compacted {compacted.runs} runs ({compacted.events} events removed;"
            f" {compacted.skipped} runs busy, left for the next pass)"
        )
