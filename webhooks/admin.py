from django.contrib import admin

from core.admin_desk import ReadOnlyAdmin
from webhooks import services
from webhooks.models import WebhookDelivery, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """Staff may switch an endpoint off (deliveries to it then fail visibly); its secret is never shown."""

    list_display = ["id", "owner", "url", "active", "event_types", "created_at"]
    list_filter = ["active"]
    search_fields = ["id", "url", "owner__username"]
    exclude = ["secret"]
    readonly_fields = ["owner", "url", "event_types", "created_at", "updated_at"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "endpoint",
        "event_type",
        "status",
        "attempts",
        "last_response_code",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    ]
    list_filter = ["status", "event_type"]
    list_select_related = ["endpoint"]
    ordering = ["-created_at"]
    search_fields = ["id", "endpoint__url", "endpoint__owner__username", "event__submission__id"]
    readonly_fields = [field.name for field in WebhookDelivery._meta.fields]
    actions = ["resend"]

    @admin.action(description="Resend (same delivery id, a fresh series of attempts)", permissions=["resend"])
    def resend(self, request, queryset):
        deliveries = list(queryset)
        resent = services.resend_deliveries([delivery.id for delivery in deliveries])
        for delivery in deliveries:
            self.log_change(request, delivery, "resent by staff")
        skipped = "" if resent == len(deliveries) else " (those of inactive endpoints were skipped)"
        self.message_user(request, f"{resent} of {len(deliveries)} deliveries queued again{skipped}.")

    def has_resend_permission(self, request):
        return request.user.has_perm("webhooks.change_webhookdelivery")
