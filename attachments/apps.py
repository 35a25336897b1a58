from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    name = "attachments"
    verbose_name = "Attachments: files the person shows the agent"

    def ready(self):
        # Runtime sits below and never imports this app: its purge says which conversation goes, and the files its
        # messages carry are decided in the same transaction (docs/data-lifecycle.md "Files").
        from attachments.services import decide_files_of_purged_conversation
        from runtime.services.tombstones import conversation_purging

        conversation_purging.connect(decide_files_of_purged_conversation, dispatch_uid="attachments-purge")
