import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0003_provider_fields_move_to_rebyte"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="owner",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunSQL(
            "UPDATE runtime_run r SET owner_id = s.owner_id FROM runtime_submission s WHERE s.id = r.submission_id",
            migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name="run",
            name="owner",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("state__in", ("queued", "running", "waiting_device", "waiting_approval"))),
                fields=["owner"],
                name="runtime_run_owner_counted",
            ),
        ),
    ]
