from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The index is built CONCURRENTLY (outside a transaction): the runs table stays writable while it builds.
    atomic = False

    dependencies = [
        ("runtime", "0009_run_session_replaced_event"),
    ]

    operations = [
        # Constant defaults: PostgreSQL records them without rewriting either table.
        migrations.AddField(
            model_name="conversation",
            name="events_compacted_through",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="run",
            name="events_compacted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("events_compacted_at__isnull", True), ("state__in", ["cancelled", "completed", "failed"])),
                fields=["finished_at"],
                name="runtime_run_to_compact",
            ),
        ),
    ]
