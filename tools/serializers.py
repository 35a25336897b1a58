"""Boundary validation for the device bridge (DESIGN §4)."""

from rest_framework import serializers

from impo.serializers import CleanTextField, StrictSerializer

INSTALLATION_ID_MAX = 256
DEVICE_TOOLS_MAX = 64


class DeviceRegistrationSerializer(StrictSerializer):
    installationId = CleanTextField(max_length=INSTALLATION_ID_MAX)
    # Names of the device tools this installation can run; an unknown name is kept but never offered.
    tools = serializers.ListField(child=CleanTextField(max_length=64), max_length=DEVICE_TOOLS_MAX)

    def validate_tools(self, value):
        return sorted(set(value))


class InvocationQuerySerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=["pending"], required=False, default="pending")


class InvocationClaimSerializer(StrictSerializer):
    deviceId = serializers.UUIDField()


class InvocationResultSerializer(StrictSerializer):
    deviceId = serializers.UUIDField()
    executionId = serializers.UUIDField()
    success = serializers.BooleanField()
    output = serializers.JSONField(required=False, allow_null=True)
    # A message, or {code, message}.
    error = serializers.JSONField(required=False, allow_null=True)

    def validate(self, attrs):
        error = attrs.get("error")
        if error is not None and not isinstance(error, str | dict):
            raise serializers.ValidationError({"error": ["Must be a string or an object."]})
        return attrs

    def report(self) -> dict:
        """The result as stored and compared: an identical retry yields the identical report."""
        data = self.validated_data
        return {"success": data["success"], "output": data.get("output"), "error": data.get("error")}
