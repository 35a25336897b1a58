import uuid
from collections import Counter

from django.contrib import admin, messages

from core.admin_desk import STAFF_NOTE, DeskAction, DeskActionsMixin, ReadOnlyAdmin
from runtime import tool_admin  # noqa: F401  (the tools app's models: their staff actions are runtime's writes)
from runtime.execution import retries
from runtime.models import (
    Conversation,
    Event,
    Message,
    Run,
    RunState,
    StaffRunAction,
    StaffRunActionOutcome,
    Submission,
    Task,
)
from runtime.services import staff

# What the run's owner reads as the reason; the admin log records which staff member decided.
STAFF_FAIL_REASON = f"{STAFF_NOTE}: the outcome could not be confirmed, so the reply was ended"


def _is_parked(run) -> bool:
    return run.state == RunState.PENDING_RECONCILIATION


def _recheck(request, run) -> str | None:
    return "Queued again: a worker re-checks the run now." if staff.staff_retry_run(run.id) else None


def _fail(request, run) -> str | None:
    ended = staff.staff_fail_run(run.id, reason=STAFF_FAIL_REASON)
    return "Marked failed: the owner sees it was resolved by staff." if ended else None


def _is_failed(run) -> bool:
    return run.state == RunState.FAILED


def _retry(request, run) -> str | None:
    outcome = retries.staff_retry_failed_run(run.id, actor=request.user, batch=uuid.uuid4())
    if outcome != StaffRunActionOutcome.QUEUED_AGAIN:
        return None
    return "Queued again: the same submission gets a new attempt, and its owner sees the reply live again."


def _outcome_summary(outcomes: list[str]) -> str:
    return ", ".join(f"{count} {outcome.replace('_', ' ')}" for outcome, count in sorted(Counter(outcomes).items()))


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
    actions = ["recheck_now", "mark_failed", "retry_failed", "cancel_selected"]
    desk_actions = (
        DeskAction(
            "retry",
            "Retry",
            "Run this failed submission again, as a new attempt? Its owner will see the reply live again.",
            _is_failed,
            _retry,
        ),
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
            if staff.staff_retry_run(run.id):
                self.log_change(request, run, "re-queued from pending reconciliation")

    @admin.action(description="Pending reconciliation: mark failed")
    def mark_failed(self, request, queryset):
        for run in queryset.filter(state=RunState.PENDING_RECONCILIATION):
            if staff.staff_fail_run(run.id, reason=STAFF_FAIL_REASON):
                self.log_change(request, run, "marked failed during reconciliation")

    @admin.action(description="Failed: retry (same submission, a new attempt)", permissions=["resolve"])
    def retry_failed(self, request, queryset):
        self._audited_on_each(request, queryset, "Retry", retries.staff_retry_failed_run)

    @admin.action(description="Cancel the selected runs (finished ones stay as they are)", permissions=["resolve"])
    def cancel_selected(self, request, queryset):
        # Each run goes through the owner's own cancel path, so a finished one is recorded as such, untouched.
        self._audited_on_each(request, queryset, "Cancel", staff.staff_cancel_run)

    def _audited_on_each(self, request, queryset, label: str, act) -> None:
        """Applies `act` to each selected run in its own transaction; the audit rows share one batch."""
        batch = uuid.uuid4()
        outcomes = [
            act(run_id, actor=request.user, batch=batch)
            for run_id in queryset.order_by("created_at").values_list("id", flat=True)
        ]
        self.message_user(request, f"{label}: {_outcome_summary(outcomes)}.", messages.SUCCESS)

    def has_resolve_permission(self, request) -> bool:
        return self.may_resolve(request)


@admin.register(StaffRunAction)
class StaffRunActionAdmin(ReadOnlyAdmin):
    """Who retried or cancelled which run, when, and what came of it; one batch per admin action."""

    list_display = ["created_at", "actor", "kind", "run", "outcome", "batch"]
    list_filter = ["kind", "outcome"]
    list_select_related = ["actor", "run"]
    ordering = ["-created_at"]
    search_fields = ["run__id", "batch", "actor__username"]
    readonly_fields = [field.name for field in StaffRunAction._meta.fields]


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
