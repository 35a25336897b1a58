
import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('rebyte', '0003_lost_resources_and_intents_in_doubt'),
        ('runtime', '0015_conversation_deletion'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='DeletionIntent',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('kind', models.CharField(choices=[('agent', 'Agent'), ('session', 'Session')], max_length=16)),
                ('remote_id', models.CharField(max_length=200, unique=True)),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('done', 'Done')], default='pending', max_length=16)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True)),
                ('outcome', models.CharField(blank=True, choices=[('deleted', 'Deleted'), ('gone', 'Gone')], max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('done_at', models.DateTimeField(blank=True, null=True)),
                ('conversation', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deletion_intents', to='runtime.conversation')),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deletion_intents', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('state', 'pending')), fields=['created_at'], name='rebyte_deletion_pending')],
                'constraints': [models.CheckConstraint(condition=models.Q(('kind__in', ['agent', 'session'])), name='rebyte_deletion_kind'), models.CheckConstraint(condition=models.Q(('state__in', ['pending', 'done'])), name='rebyte_deletion_state'), models.CheckConstraint(condition=models.Q(models.Q(('outcome', ''), ('state', 'pending')), models.Q(('done_at__isnull', False), ('outcome__in', ['deleted', 'gone']), ('state', 'done')), _connector='OR'), name='rebyte_done_deletion_has_outcome')],
            },
        ),
    ]
