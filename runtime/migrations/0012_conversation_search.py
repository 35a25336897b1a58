"""GIN indexes for conversation search: built concurrently, so a busy messages table keeps taking writes."""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runtime", "0011_run_notifications"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="conversation",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.search.SearchVector("title", config="simple"),
                name="runtime_conversation_title_fts",
            ),
        ),
        AddIndexConcurrently(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.search.SearchVector("text", config="simple"),
                name="runtime_message_text_fts",
            ),
        ),
    ]
