from django.contrib import admin

from impo.admin_desk import STAFF_NOTE, DeskAction, DeskActionsMixin, ReadOnlyAdmin
from runtime import services
from runtime.models import Conversation, Event, Message, Run, RunState, Submission, Task

# What the run's owner reads as the reason; the admin log records which staff member decided.
STAFF_FAIL_REASON = f"{STAFF_NOTE}: the outcome could not be confirmed, so the reply was ended"


def _is_parked(run) -> bool:
    return run.state == RunState.PENDING_RECONCILIATION


def _recheck(request, run) -> str | None:
    return "Queued again: a worker re-checks the run now." if services.staff_retry_run(run.id) else None


def _fail(request, run) -> str | None:
    ended = services.staff_fail_run(run.id, reason=STAFF_FAIL_REASON)
    return "Marked failed: the owner sees it was resolved by staff." if ended else None


@admin.register(Run)
class RunAdmin(DeskActionsMixin, ReadOnlyAdmin):
    """Runs, newest first, with those pending reconciliation one filter away; decisions go to the admin log."""

    list_display = [
        "id",
        "state",
        "owner",
        "conversation",
        "created_at",
        "attempts",
        "error_code",
        "updated_at",
        "trace_id",
    ]
    list_filter = ["state", "error_code"]
    list_select_related = ["submission__owner", "submission__conversation"]
    ordering = ["-created_at"]
    search_fields = ["id", "submission__id", "remote_turn__turn_id", "submission__owner__username", "traceparent"]
    readonly_fields = [field.name for field in Run._meta.fields] + ["trace_id"]
    actions = ["recheck_now", "mark_failed"]
    desk_actions = (
        DeskAction("recheck", "Re-check now", "Queue this run again so a worker re-checks it?", _is_parked, _recheck),
        DeskAction(
            "fail",
            "Mark failed",
            "End this run as failed? Its owner will see it was resolved by staff.",
            _is_parked,
            _fail,
        ),
    )

    @admin.display(ordering="submission__owner__username")
    def owner(self, run):
        return run.submission.owner

    @admin.display(ordering="submission__conversation")
    def conversation(self, run):
        return run.submission.conversation

    @admin.action(description="Pending reconciliation: re-check now (queue the run again)")
    def recheck_now(self, request, queryset):
        for run in queryset.filter(state=RunState.PENDING_RECONCILIATION):
            if services.staff_retry_run(run.id):
                self.log_change(request, run, "re-queued from pending reconciliation")

    @admin.action(description="Pending reconciliation: mark failed")
    def mark_failed(self, request, queryset):
        for run in queryset.filter(state=RunState.PENDING_RECONCILIATION):
            if services.staff_fail_run(run.id, reason=STAFF_FAIL_REASON):
                self.log_change(request, run, "marked failed during reconciliation")


@admin.register(Submission)
class SubmissionAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "conversation", "client_message_id", "created_at", "trace_id"]
    list_select_related = ["owner", "conversation", "run"]
    search_fields = ["id", "client_message_id", "owner__username", "run__traceparent"]
    readonly_fields = [field.name for field in Submission._meta.fields] + ["trace_id"]

    @admin.display(description="trace id")
    def trace_id(self, submission):
        return submission.run.trace_id


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "kind", "title", "last_event_seq", "updated_at"]
    ordering = ["-updated_at"]
    list_filter = ["kind"]
    search_fields = ["id", "owner__username", "title"]
    readonly_fields = [field.name for field in Conversation._meta.fields]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "sequence", "role", "status", "created_at"]
    list_filter = ["role", "status"]
    readonly_fields = [field.name for field in Message._meta.fields]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "seq", "type", "submission", "created_at", "trace_id"]
    list_filter = ["type"]
    search_fields = ["trace_id"]
    readonly_fields = [field.name for field in Event._meta.fields]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "title", "created_at"]
    search_fields = ["id", "title", "owner__username"]
    readonly_fields = [field.name for field in Task._meta.fields]
