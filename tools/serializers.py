"""Boundary validation for the device bridge (docs/design.md §4)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.serializers import CleanTextField, StrictBooleanField, StrictSerializer, StrictUUIDField
from tools.approvals import ApprovalAnswer
from tools.capabilities import TOKEN_PATTERN
from tools.models import ApprovalOutcome, ApprovalStatus, CapabilityDecision

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


APPROVAL_REASON_MAX = 2000
CLIENT_DECISION_ID_MAX = 256


@extend_schema_field({"type": "object", "additionalProperties": True})
class JsonObjectField(serializers.JSONField):
    """A JSON object (a tool's arguments); whether it fits the tool's schema is checked against the tool."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return super().to_internal_value(data)


class ToolApprovalAnswerSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    arguments = JsonObjectField(required=False, help_text="Approve with these arguments instead (an edit).")
    reason = CleanTextField(max_length=APPROVAL_REASON_MAX, required=False, help_text="Why not: the agent reads it.")
    clientDecisionId = CleanTextField(max_length=CLIENT_DECISION_ID_MAX)
    remember = serializers.BooleanField(
        required=False,
        default=False,
        help_text="With an approval: always allow this tool from now on (only a tool that takes a standing"
        " permission; else 400 `always_allow_not_offered`). Revoked from the account.",
    )

    def validate(self, data):
        if data["decision"] == "deny" and "arguments" in data:
            raise serializers.ValidationError({"arguments": ["Only an approval carries arguments."]})
        if data["decision"] == "deny" and data["remember"]:
            raise serializers.ValidationError({"remember": ["Only an approval can be remembered."]})
        if data["decision"] == "approve" and "reason" in data:
            raise serializers.ValidationError({"reason": ["Only a denial carries a reason."]})
        return data

    def to_answer(self) -> ApprovalAnswer:
        data = self.validated_data
        return ApprovalAnswer(
            approve=data["decision"] == "approve",
            client_decision_id=data["clientDecisionId"],
            arguments=data.get("arguments"),
            reason=data.get("reason", ""),
            remember=data["remember"],
        )


class ApprovalCapabilityAnswerSerializer(StrictSerializer):
    """A notification's Approve or Deny: the capability is the authority, bound to this approval and decision."""

    approvalId = StrictUUIDField(help_text="The approval the notification announced (its `toolCallId`).")
    decision = serializers.ChoiceField(choices=CapabilityDecision.choices, help_text="The action clicked.")
    # The refusal never quotes the value: a malformed token is named, not echoed.
    capability = serializers.RegexField(
        TOKEN_PATTERN,
        help_text="The action's single-use token, from the push message.",
        error_messages={"invalid": "Must be the 32 base64url characters of a notification's capability."},
    )


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


# How a decided approval stands, as an answer names it (one enum in the schema for both answers).
DECIDED_APPROVAL_STATUSES = (ApprovalStatus.APPROVED, ApprovalStatus.DENIED)


class ToolApprovalSerializer(serializers.Serializer):
    approvalId = serializers.UUIDField(help_text="The tool call's id, as in the path.")
    toolCallId = serializers.CharField(help_text="The provider's call id, as in the stream's tool parts.")
    toolName = serializers.CharField()
    status = serializers.ChoiceField(choices=DECIDED_APPROVAL_STATUSES)
    outcome = serializers.ChoiceField(choices=ApprovalOutcome.choices)
    input = serializers.DictField(help_text="The arguments the call runs with (edited ones when edited).")
    reason = serializers.CharField(allow_blank=True)
    clientDecisionId = serializers.CharField(allow_blank=True, help_text="Of the answer that decided.")
    decidedAt = serializers.DateTimeField()
    replayed = serializers.BooleanField(help_text="This answer repeated the recorded decision: nothing changed.")


class ApprovalDecidedByCapabilitySerializer(serializers.Serializer):
    """What a notification's decision answers: the capability gives the right to decide, not to read the call."""

    approvalId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=DECIDED_APPROVAL_STATUSES)
    outcome = serializers.ChoiceField(choices=ApprovalOutcome.choices)
    decidedAt = serializers.DateTimeField()
