"""Boundary validation for scheduled-task commands (docs/design.md §7); schedule rules live in schedules.py."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.serializers import CleanTextField, StrictBooleanField, StrictSerializer, StrictUUIDField
from runtime.selectors import TASK_STATUSES
from scheduling import schedules
from scheduling.models import PLAN_GOAL_MAX, PLAN_TITLE_MAX, OccurrenceState
from scheduling.services import PlanCommand

CLIENT_REQUEST_ID_MAX = 256


@extend_schema_field(schedules.openapi_schema())
class ScheduleObjectField(serializers.Field):
    """Passes the object through; the service validates it with the schedule rules (which need the clock)."""

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


class PlanContentSerializer(StrictSerializer):
    title = CleanTextField(max_length=PLAN_TITLE_MAX)
    goal = CleanTextField(max_length=PLAN_GOAL_MAX)
    schedule = ScheduleObjectField()
    enabled = StrictBooleanField()

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            # Refused already: the schedule's own problem (which the service would name next) is named too, so
            # a form marks every refused field at once. Alone, it stays the service's `invalid_task_schedule`.
            if isinstance(exc.detail, dict) and isinstance(data, dict) and "schedule" in data:
                try:
                    schedules.parse_schedule(data["schedule"], now=timezone.now())
                except schedules.ScheduleError as problem:
                    exc.detail.setdefault(problem.field, [problem.message])
            raise

    def to_command(self) -> PlanCommand:
        data = self.validated_data
        return PlanCommand(title=data["title"], goal=data["goal"], schedule=data["schedule"], enabled=data["enabled"])


class PlanCreateSerializer(PlanContentSerializer):
    clientRequestId = CleanTextField(max_length=CLIENT_REQUEST_ID_MAX)


class PlanUpdateSerializer(PlanContentSerializer):
    revision = StrictUUIDField()


class PlanDeleteSerializer(StrictSerializer):
    revision = StrictUUIDField()


class RunsQuerySerializer(StrictSerializer):
    before = serializers.CharField(required=False, max_length=200, help_text="The nextCursor of the previous page.")


# --- outputs ---------------------------------------------------------------------------------------------

PLAN_RUN_STATUSES = (*TASK_STATUSES, OccurrenceState.SKIPPED_OVERLAP.value)


class PlanSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    goal = serializers.CharField()
    schedule = ScheduleObjectField()
    enabled = serializers.BooleanField()
    revision = serializers.UUIDField(help_text="New on every change; send it back to change or delete the plan.")
    nextRunAt = serializers.DateTimeField(allow_null=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class PlanListSerializer(serializers.Serializer):
    schedules = PlanSerializer(many=True)


class PlanDeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()


class PlanRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    taskId = serializers.UUIDField(allow_null=True, help_text="null for a skipped occurrence.")
    scheduledAt = serializers.DateTimeField()
    createdAt = serializers.DateTimeField()
    status = serializers.ChoiceField(
        choices=PLAN_RUN_STATUSES,
        help_text="The admitted Task's current status, or skipped_overlap.",
    )


class PlanRunsPageSerializer(serializers.Serializer):
    runs = PlanRunSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)
