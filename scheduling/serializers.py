"""Boundary validation for scheduled-task commands (DESIGN §7); schedule rules live in schedules.py."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from impo.serializers import CleanTextField, StrictBooleanField, StrictSerializer
from scheduling import schedules
from scheduling.models import PLAN_GOAL_MAX, PLAN_TITLE_MAX
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

    def to_command(self) -> PlanCommand:
        data = self.validated_data
        return PlanCommand(title=data["title"], goal=data["goal"], schedule=data["schedule"], enabled=data["enabled"])


class PlanCreateSerializer(PlanContentSerializer):
    clientRequestId = CleanTextField(max_length=CLIENT_REQUEST_ID_MAX)


class PlanUpdateSerializer(PlanContentSerializer):
    revision = serializers.UUIDField()


class PlanDeleteSerializer(StrictSerializer):
    revision = serializers.UUIDField()


class RunsQuerySerializer(StrictSerializer):
    before = serializers.CharField(required=False, max_length=200, help_text="The nextCursor of the previous page.")
