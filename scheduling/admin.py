from django.contrib import admin

from scheduling.models import Occurrence, Plan


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "enabled", "next_run_at", "generation", "synced_generation", "deleted_at")
    list_filter = ("enabled",)
    search_fields = ("title", "owner__username")
    readonly_fields = ("revision", "generation", "synced_generation", "revised_at", "created_at", "updated_at")


@admin.register(Occurrence)
class OccurrenceAdmin(admin.ModelAdmin):
    list_display = ("plan", "scheduled_at", "state", "task", "created_at")
    list_filter = ("state",)
    readonly_fields = ("plan", "revision", "scheduled_at", "state", "task", "created_at")
