from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0004_lean_admission"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="message_policy",
            field=models.CharField(
                choices=[("queue", "Queue"), ("interrupt", "Interrupt"), ("reject", "Reject")],
                default="queue",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.CheckConstraint(
                condition=models.Q(("message_policy__in", ["queue", "interrupt", "reject"])),
                name="runtime_conversation_message_policy",
            ),
        ),
    ]
