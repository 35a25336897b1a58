
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('runtime', '0015_conversation_deletion'),
    ]

    operations = [
        migrations.CreateModel(
            name='AccountDeletion',
            fields=[
                ('owner', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to=settings.AUTH_USER_MODEL)),
                ('requested_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('remote_done_at', models.DateTimeField(blank=True, null=True)),
                ('last_woken_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
    ]
