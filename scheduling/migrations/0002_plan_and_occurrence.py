"""The models take the names the code calls them (Plan, Occurrence); the tables, their columns, constraints and the
foreign keys into them stay as they are, so this changes Django's state only and emits no SQL."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0002_run_pending_intent_run_provider_cursor_and_more"),
        ("scheduling", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterModelTable(name="scheduledtask", table="scheduling_scheduledtask"),
                migrations.AlterModelTable(name="scheduledrun", table="scheduling_scheduledrun"),
                migrations.RenameModel(old_name="ScheduledTask", new_name="Plan"),
                migrations.RenameModel(old_name="ScheduledRun", new_name="Occurrence"),
                migrations.AlterField(
                    model_name="plan",
                    name="owner",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="plans",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="occurrence",
                    name="plan",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="occurrences",
                        to="scheduling.plan",
                    ),
                ),
                migrations.AlterField(
                    model_name="occurrence",
                    name="task",
                    field=models.OneToOneField(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="occurrence",
                        to="runtime.task",
                    ),
                ),
            ],
        ),
    ]
