from django.contrib import admin, messages

from impo.errors import ApplicationError
from tools import services
from tools.models import Device, DeviceInvocation, Note, ToolCall, ToolCallState, ToolReceipt


class ToolReceiptInline(admin.StackedInline):
    model = ToolReceipt
    can_delete = False
    readonly_fields = ["result", "created_at", "submitted_at"]
    extra = 0


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["call_id", "tool_name", "side_effect", "state", "attempts", "error_code", "created_at"]
    list_filter = ["state", "side_effect", "tool_name"]
    search_fields = ["call_id", "run__id"]
    readonly_fields = [field.name for field in ToolCall._meta.fields]
    inlines = [ToolReceiptInline]
    actions = ["resolve_as_succeeded", "resolve_as_failed"]

    def _resolve(self, request, queryset, *, succeeded: bool):
        finding = "did happen" if succeeded else "did not happen"
        for call in queryset.filter(state=ToolCallState.UNCERTAIN):
            try:
                services.resolve_uncertain_call(
                    call.id, succeeded=succeeded, note=f"resolved by {request.user.get_username()} in admin"
                )
            except ApplicationError as exc:
                self.message_user(request, exc.message, level=messages.WARNING)
            else:
                self.log_change(request, call, f"resolved: the action {finding}")

    @admin.action(description="Uncertain calls: the action did happen (record the finding)")
    def resolve_as_succeeded(self, request, queryset):
        self._resolve(request, queryset, succeeded=True)

    @admin.action(description="Uncertain calls: the action did not happen (record the finding)")
    def resolve_as_failed(self, request, queryset):
        self._resolve(request, queryset, succeeded=False)


@admin.register(DeviceInvocation)
class DeviceInvocationAdmin(admin.ModelAdmin):
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
