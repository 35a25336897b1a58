from django.contrib import admin

from runtime import services
from runtime.models import Conversation, Event, Message, Run, RunState, Submission, Task


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """Runs, with those pending reconciliation one filter away; decisions go to the admin log."""

    list_display = [
        "id",
        "state",
        "submission",
        "attempts",
        "lease_owner",
        "lease_expires_at",
        "error_code",
        "updated_at",
    ]
    list_filter = ["state", "error_code"]
    search_fields = ["id", "submission__id", "remote_turn__turn_id", "submission__owner__username"]
    readonly_fields = [field.name for field in Run._meta.fields]
    actions = ["recheck_now", "mark_failed"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("submission")

    @admin.action(description="Pending reconciliation: re-check now (queue the run again)")
    def recheck_now(self, request, queryset):
        for run in queryset.filter(state=RunState.PENDING_RECONCILIATION):
            if services.staff_retry_run(run.id):
                self.log_change(request, run, "re-queued from pending reconciliation")

    @admin.action(description="Pending reconciliation: mark failed")
    def mark_failed(self, request, queryset):
        for run in queryset.filter(state=RunState.PENDING_RECONCILIATION):
            reason = f"failed by {request.user.get_username()} during reconciliation"
            if services.staff_fail_run(run.id, reason=reason):
                self.log_change(request, run, reason)


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "conversation", "client_message_id", "created_at"]
    search_fields = ["id", "client_message_id", "owner__username"]
    readonly_fields = [field.name for field in Submission._meta.fields]


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "kind", "title", "last_event_seq", "updated_at"]
    list_filter = ["kind"]
    search_fields = ["id", "owner__username", "title"]
    readonly_fields = [field.name for field in Conversation._meta.fields]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "sequence", "role", "status", "created_at"]
    list_filter = ["role", "status"]
    readonly_fields = [field.name for field in Message._meta.fields]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["conversation", "seq", "type", "submission", "created_at"]
    list_filter = ["type"]
    readonly_fields = [field.name for field in Event._meta.fields]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "title", "created_at"]
    search_fields = ["id", "title", "owner__username"]
    readonly_fields = [field.name for field in Task._meta.fields]
