"""Boundary validation for scheduled-task commands (DESIGN §7); schedule rules live in schedules.py."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from impo.serializers import CleanTextField, StrictSerializer
from scheduling.models import PLAN_GOAL_MAX, PLAN_TITLE_MAX
from scheduling.services import PlanCommand

CLIENT_REQUEST_ID_MAX = 256


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true or false: DRF's own field would also take "yes", 1 and "on"."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            raise serializers.ValidationError("Must be true or false.")
        return data


@extend_schema_field(OpenApiTypes.OBJECT)
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
    before = serializers.CharField(required=False, max_length=200)
