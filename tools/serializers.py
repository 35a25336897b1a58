"""Boundary validation for the device bridge (DESIGN §4)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from impo.serializers import CleanTextField, StrictBooleanField, StrictSerializer

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
    deviceId = serializers.UUIDField()


class InvocationResultSerializer(StrictSerializer):
    deviceId = serializers.UUIDField()
    executionId = serializers.UUIDField()
    success = StrictBooleanField()
    output = serializers.JSONField(required=False, allow_null=True)
    error = DeviceErrorField(required=False, allow_null=True)

    def report(self) -> dict:
        """The result as stored and compared: an identical retry yields the identical report."""
        data = self.validated_data
        return {"success": data["success"], "output": data.get("output"), "error": data.get("error")}
