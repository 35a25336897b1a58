from django.contrib import admin

from scheduling.models import ScheduledRun, ScheduledTask


@admin.register(ScheduledTask)
class ScheduledTaskAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "enabled", "next_run_at", "generation", "synced_generation", "deleted_at")
    list_filter = ("enabled",)
    search_fields = ("title", "owner__username")
    readonly_fields = ("revision", "generation", "synced_generation", "revised_at", "created_at", "updated_at")


@admin.register(ScheduledRun)
class ScheduledRunAdmin(admin.ModelAdmin):
    list_display = ("plan", "scheduled_at", "state", "task", "created_at")
    list_filter = ("state",)
    readonly_fields = ("plan", "revision", "scheduled_at", "state", "task", "created_at")
