from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The deletion queue's index is built CONCURRENTLY (outside a transaction): conversations stay writable.
    atomic = False

    dependencies = [
        ("runtime", "0014_submission_attempts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Nullable columns without a default: PostgreSQL adds them without rewriting the table.
        migrations.AddField(
            model_name="conversation",
            name="deleted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="purged_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        # A cleared Main Chat stays as a tombstone beside the owner's new one: one *live* Main Chat per owner.
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("deleted_at__isnull", True), ("kind", "main_chat")),
                fields=("owner",),
                name="runtime_one_live_main_chat_per_owner",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="conversation",
            name="runtime_one_main_chat_per_owner",
        ),
        AddIndexConcurrently(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("deleted_at__isnull", False), ("purged_at__isnull", True)),
                fields=["deleted_at"],
                name="runtime_conversation_to_purge",
            ),
        ),
    ]
