"""Boundary validation for the device bridge (DESIGN §4)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from impo.serializers import CleanTextField, StrictBooleanField, StrictSerializer, StrictUUIDField

INSTALLATION_ID_MAX = 256
DEVICE_TOOLS_MAX = 64


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "object"}], "nullable": True})
class DeviceErrorField(serializers.JSONField):
    """What went wrong on the device: a message, or `{code, message}`."""

    def to_internal_value(self, data):
        if data is not None and not isinstance(data, str | dict):
            raise serializers.ValidationError("Must be a string or an object.")
        return super().to_internal_value(data)


class DeviceRegistrationSerializer(StrictSerializer):
    installationId = CleanTextField(max_length=INSTALLATION_ID_MAX)
    # Names of the device tools this installation can run; an unknown name is kept but never offered.
    tools = serializers.ListField(child=CleanTextField(max_length=64), max_length=DEVICE_TOOLS_MAX)

    def validate_tools(self, value):
        return sorted(set(value))


class InvocationQuerySerializer(StrictSerializer):
    status = serializers.ChoiceField(
        choices=["pending"], required=False, default="pending", help_text="Pending and claimed ones."
    )


class InvocationClaimSerializer(StrictSerializer):
    deviceId = StrictUUIDField()


class InvocationResultSerializer(StrictSerializer):
    deviceId = StrictUUIDField()
    executionId = StrictUUIDField()
    success = StrictBooleanField()
    output = serializers.JSONField(required=False, allow_null=True)
    error = DeviceErrorField(required=False, allow_null=True)

    def report(self) -> dict:
        """The result as stored and compared: an identical retry yields the identical report."""
        data = self.validated_data
        return {"success": data["success"], "output": data.get("output"), "error": data.get("error")}


# --- outputs ---------------------------------------------------------------------------------------------

LISTED_INVOCATION_STATUSES = ("pending", "claimed")


class DeviceRegisteredSerializer(serializers.Serializer):
    deviceId = serializers.UUIDField()


class InvocationSerializer(serializers.Serializer):
    invocationId = serializers.UUIDField()
    toolCallId = serializers.CharField()
    deviceId = serializers.UUIDField()
    expiresAt = serializers.DateTimeField()
    toolName = serializers.CharField()
    input = serializers.DictField(allow_null=True, help_text="The arguments the agent gave the tool.")
    status = serializers.ChoiceField(choices=LISTED_INVOCATION_STATUSES)
    executionId = serializers.UUIDField(allow_null=True)


class InvocationListSerializer(serializers.Serializer):
    invocations = InvocationSerializer(many=True)


class InvocationClaimedSerializer(serializers.Serializer):
    executionId = serializers.UUIDField()
    expiresAt = serializers.DateTimeField()


class InvocationResultAcceptedSerializer(serializers.Serializer):
    accepted = serializers.BooleanField()
    duplicate = serializers.BooleanField(help_text="An identical retry of a result already recorded.")
