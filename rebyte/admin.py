from django.contrib import admin, messages

from core.admin_desk import DeskAction, DeskActionsMixin
from rebyte import deletion_intents
from rebyte.models import (
    OPEN_INTENT_STATES,
    CreationIntent,
    DeletionIntent,
    DeletionState,
    IntentState,
    RemoteSession,
    RemoteTurn,
    SavedAgent,
)


def _reconciler():
    """`rebyte.reconciler`, imported when staff act on an intent: it brings the `openai` SDK, which every web process
    would otherwise import at its start (most of a second of CPU, and its memory) for actions it rarely takes."""
    from rebyte import reconciler

    return reconciler


def _gateway():
    from rebyte.provider import provider_gateway

    return provider_gateway()


class PendingFirst(admin.SimpleListFilter):
    title = "needs attention"
    parameter_name = "open"

    def lookups(self, request, model_admin):
        return [("pending", "Pending reconciliation"), ("open", "Open (intended or pending)")]

    def queryset(self, request, queryset):
        if self.value() == "pending":
            return queryset.filter(state=IntentState.PENDING_RECONCILIATION)
        if self.value() == "open":
            return queryset.filter(state__in=OPEN_INTENT_STATES)
        return queryset


def _is_open(intent) -> bool:
    return intent.state in OPEN_INTENT_STATES


def _recheck(request, intent) -> str:
    settled = _reconciler().reconcile_intent(intent.id, _gateway())
    return f"Re-checked with the provider: now {settled.state}."


def _fail(request, intent) -> str | None:
    note = intent.resolution_note or "failed in admin"
    failed = _reconciler().staff_fail_intent(intent.id, actor=request.user, note=note)
    return "Marked failed: the runs waiting for it fail." if failed else None


@admin.register(CreationIntent)
class CreationIntentAdmin(DeskActionsMixin, admin.ModelAdmin):
    """Remote creations whose outcome is unknown; every decision is written to the admin log."""

    list_display = ["id", "kind", "owner", "conversation", "state", "needs_staff", "attempts", "remote_id"]
    list_filter = [PendingFirst, "needs_staff", "state", "kind"]
    search_fields = ["id", "remote_id", "owner__username"]
    readonly_fields = [
        "id",
        "owner",
        "kind",
        "conversation",
        "state",
        "needs_staff",
        "attempts",
        "looked_empty_at",
        "last_error",
        "resolved_by",
        "created_at",
        "updated_at",
    ]
    fields = [*readonly_fields, "remote_id", "resolution_note"]
    actions = ["recheck_now", "mark_resolved", "mark_failed"]
    ordering = ["-created_at"]
    desk_actions = (
        DeskAction("recheck", "Re-check now", "Ask the provider again what exists?", _is_open, _recheck),
        DeskAction("fail", "Mark failed", "Give up on this creation? The runs waiting for it fail.", _is_open, _fail),
    )

    def save_model(self, request, obj, form, change):
        # Editing only stages the remote id and note for "mark resolved", and only while the intent is
        # open; state changes go through the actions, which log who decided.
        CreationIntent.objects.filter(id=obj.id, state__in=OPEN_INTENT_STATES).update(
            remote_id=obj.remote_id, resolution_note=obj.resolution_note
        )

    @admin.action(description="Re-check now with the provider")
    def recheck_now(self, request, queryset):
        gateway = _gateway()
        for intent in queryset.filter(state__in=OPEN_INTENT_STATES):
            settled = _reconciler().reconcile_intent(intent.id, gateway)
            self.log_change(request, intent, f"re-checked: now {settled.state}")
            self.message_user(request, f"{intent}: {settled.state}")

    @admin.action(description="Mark resolved (adopt the remote id entered on the intent)")
    def mark_resolved(self, request, queryset):
        for intent in queryset.filter(state__in=OPEN_INTENT_STATES):
            if not intent.remote_id:
                self.message_user(request, f"{intent}: enter the remote id first", level=messages.WARNING)
                continue
            _reconciler().staff_adopt_intent(
                intent.id,
                remote_id=intent.remote_id,
                actor=request.user,
                note=intent.resolution_note or "adopted in admin",
            )
            self.log_change(request, intent, f"marked resolved as {intent.remote_id}")

    @admin.action(description="Mark failed (the runs waiting for it fail)")
    def mark_failed(self, request, queryset):
        for intent in queryset.filter(state__in=OPEN_INTENT_STATES):
            if _reconciler().staff_fail_intent(
                intent.id, actor=request.user, note=intent.resolution_note or "failed in admin"
            ):
                self.log_change(request, intent, "marked failed")


class WaitingOnTheProvider(admin.SimpleListFilter):
    title = "waiting on the provider"
    parameter_name = "waiting"

    def lookups(self, request, model_admin):
        return [("yes", "Pending"), ("no", "Done")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(state=DeletionState.PENDING)
        if self.value() == "no":
            return queryset.filter(state=DeletionState.DONE)
        return queryset


@admin.register(DeletionIntent)
class DeletionIntentAdmin(admin.ModelAdmin):
    """Remote deletes of deleted conversations and accounts (docs/data-lifecycle.md "Deleting"): the pending ones
    are still waiting on the provider and are retried with backoff, for ever; their last error says why."""

    list_display = ["remote_id", "kind", "owner", "state", "attempts", "next_attempt_at", "last_error", "created_at"]
    list_filter = [WaitingOnTheProvider, "kind", "outcome"]
    search_fields = ["remote_id", "owner__username", "conversation__id"]
    readonly_fields = [field.name for field in DeletionIntent._meta.fields]
    ordering = ["-state", "created_at"]  # pending first, oldest first
    actions = ["attempt_now"]

    @admin.action(description="Attempt again now (skip the backoff)")
    def attempt_now(self, request, queryset):
        count = deletion_intents.attempt_now(list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"{count} pending deletions are due now; the sweeper attempts them next.")


@admin.register(SavedAgent)
class SavedAgentAdmin(admin.ModelAdmin):
    """Each owner's agents; one the provider lost (404), or one new instructions retired, stays, marked gone with the
    reason, beside the one that replaced it."""

    list_display = ["owner", "remote_id", "created_at", "gone_at", "gone_reason"]
    list_filter = [("gone_at", admin.EmptyFieldListFilter), "gone_reason"]
    search_fields = ["owner__username", "remote_id"]
    readonly_fields = ["owner", "remote_id", "intent", "created_at", "gone_at", "gone_reason"]


@admin.register(RemoteSession)
class RemoteSessionAdmin(admin.ModelAdmin):
    list_display = [
        "remote_id",
        "conversation",
        "state",
        "turn_count",
        "context_estimate",
        "rotation_reason",
        "first_message_sequence",
        "last_message_sequence",
        "last_activity_at",
    ]
    list_filter = ["state", "rotation_reason"]
    search_fields = ["remote_id", "conversation__id"]
    readonly_fields = [field.name for field in RemoteSession._meta.fields]


@admin.register(RemoteTurn)
class RemoteTurnAdmin(admin.ModelAdmin):
    list_display = ["run", "session", "turn_id", "cancel_sent_at", "pending_intent", "updated_at"]
    search_fields = ["turn_id", "run__id", "session__remote_id"]
    readonly_fields = [field.name for field in RemoteTurn._meta.fields]
