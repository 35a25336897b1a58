"""Staff's desk for the tools app's models. It lives in runtime because its one write, a finding on an uncertain
call, locks the call's run and projects an event: runtime's to do (`runtime.services.devices`), not tools'.
Registered by importing it from `runtime.admin`.
"""

from django.contrib import admin, messages

from core.admin_desk import STAFF_NOTE, DeskAction, DeskActionsMixin, ReadOnlyAdmin, ReadOnlyInline
from core.errors import ApplicationError
from runtime.services import devices
from tools.models import Device, DeviceInvocation, Note, ToolApproval, ToolCall, ToolCallState, ToolReceipt

_FINDING = {True: "did happen", False: "did not happen"}


class ToolReceiptInline(ReadOnlyInline):
    model = ToolReceipt
    readonly_fields = ["result", "created_at", "submitted_at"]


def _is_uncertain(call) -> bool:
    return call.state == ToolCallState.UNCERTAIN


def _resolver(succeeded: bool):
    def resolve(request, call) -> str | None:
        # The note reaches the agent and the end user: it names staff, never the staff member.
        resolved = devices.resolve_uncertain_call(call.id, succeeded=succeeded, note=STAFF_NOTE)
        if resolved.run.is_terminal:  # the finding only settles the record: the run ended before it
            return f"Recorded: the action {_FINDING[succeeded]}. Its run had already ended ({resolved.run.state})."
        return f"Resolved: the action {_FINDING[succeeded]}; the run goes on."

    return resolve


@admin.register(ToolCall)
class ToolCallAdmin(DeskActionsMixin, ReadOnlyAdmin):
    list_display = ["call_id", "tool_name", "side_effect", "state", "attempts", "error_code", "created_at"]
    list_filter = ["state", "side_effect", "tool_name"]
    ordering = ["-created_at"]
    search_fields = ["call_id", "run__id"]
    readonly_fields = [field.name for field in ToolCall._meta.fields]
    inlines = [ToolReceiptInline]
    actions = ["resolve_as_succeeded", "resolve_as_failed"]
    desk_actions = (
        DeskAction(
            "happened",
            "It did happen",
            "Record that the action happened?",
            _is_uncertain,
            _resolver(True),
        ),
        DeskAction(
            "did-not-happen",
            "It did not happen",
            "Record that the action did not happen?",
            _is_uncertain,
            _resolver(False),
        ),
    )

    def _resolve(self, request, queryset, *, succeeded: bool):
        for call in queryset.filter(state=ToolCallState.UNCERTAIN):
            try:
                devices.resolve_uncertain_call(call.id, succeeded=succeeded, note=STAFF_NOTE)
            except ApplicationError as exc:
                self.message_user(request, exc.message, level=messages.WARNING)
            else:
                self.log_change(request, call, f"resolved: the action {_FINDING[succeeded]}")

    @admin.action(description="Uncertain calls: the action did happen (record the finding)")
    def resolve_as_succeeded(self, request, queryset):
        self._resolve(request, queryset, succeeded=True)

    @admin.action(description="Uncertain calls: the action did not happen (record the finding)")
    def resolve_as_failed(self, request, queryset):
        self._resolve(request, queryset, succeeded=False)


@admin.register(ToolApproval)
class ToolApprovalAdmin(ReadOnlyAdmin):
    """Calls waiting for their owner's answer (filter `pending`), oldest first: the owner decides, staff watch."""

    list_display = ["tool_call", "tool_name", "owner", "status", "outcome", "expires_at", "created_at"]
    list_filter = ["status", "outcome", "tool_call__tool_name"]
    list_select_related = ["tool_call__run__submission__owner"]
    ordering = ["created_at"]
    search_fields = ["tool_call__call_id", "tool_call__run__id"]
    readonly_fields = [field.name for field in ToolApproval._meta.fields]

    @admin.display(description="tool")
    def tool_name(self, approval):
        return approval.tool_call.tool_name

    @admin.display(description="owner")
    def owner(self, approval):
        return approval.tool_call.run.submission.owner


@admin.register(DeviceInvocation)
class DeviceInvocationAdmin(ReadOnlyAdmin):
    list_display = ["id", "device", "status", "expires_at", "claimed_at", "completed_at"]
    list_filter = ["status"]
    readonly_fields = [field.name for field in DeviceInvocation._meta.fields]


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "installation_id", "created_at"]
    search_fields = ["installation_id", "owner__username"]


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "created_at"]
    readonly_fields = ["source_call"]
