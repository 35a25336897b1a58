"""The accounts app's request and answer shapes, for the views and the OpenAPI schema."""

from rest_framework import serializers

from accounts.selectors import FORMAT
from core.serializers import StrictSerializer, reject_nul
from rebyte.models import OWNER_INSTRUCTIONS_MAX_CHARS
from runtime.http.history_serializers import HistoryMessageSerializer
from runtime.models import ConversationKind, MessagePolicy
from scheduling.serializers import PlanSerializer
from webhooks.serializers import EndpointSerializer


class AccountDeleteSerializer(StrictSerializer):
    password = serializers.CharField(trim_whitespace=False, max_length=4096, help_text="The account's password.")


class PasswordCheckedSerializer(serializers.Serializer):
    passwordCorrect = serializers.BooleanField(help_text="Always true: a wrong password is 403 `password_incorrect`.")


class AccountDeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField(
        help_text="Always true: the account can no longer sign in; its data goes in the background."
    )


class InstructionsTextField(serializers.CharField):
    """A string (never a number made one), trimmed, NUL-free; blank allowed."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators.append(reject_nul)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


class InstructionsUpdateSerializer(StrictSerializer):
    text = InstructionsTextField(
        allow_blank=True,
        max_length=OWNER_INSTRUCTIONS_MAX_CHARS,
        help_text=f"Your standing instructions to the agent, at most {OWNER_INSTRUCTIONS_MAX_CHARS} characters once"
        " trimmed; blank for none.",
    )


class InstructionsSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, help_text="Your standing instructions; blank for none.")
    maxLength = serializers.IntegerField(help_text="The most characters `text` may have.")
    updatedAt = serializers.DateTimeField(allow_null=True, help_text="When they last changed; null if never set.")


class ExportReceiptSerializer(serializers.Serializer):
    toolCallId = serializers.CharField()
    result = serializers.JSONField(help_text="The tool's result as it was saved and sent to the agent.")
    createdAt = serializers.DateTimeField()


class ExportMessageSerializer(HistoryMessageSerializer):
    receipts = ExportReceiptSerializer(many=True)


class ExportConversationSerializer(serializers.Serializer):
    conversationId = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=ConversationKind.choices)
    taskId = serializers.UUIDField(allow_null=True)
    title = serializers.CharField(allow_blank=True)
    messagePolicy = serializers.ChoiceField(choices=MessagePolicy.choices)
    createdAt = serializers.DateTimeField()
    messages = ExportMessageSerializer(many=True)


class ToolPermissionSerializer(serializers.Serializer):
    toolName = serializers.CharField()
    title = serializers.CharField(help_text="The tool's name for people.")
    grantedAt = serializers.DateTimeField()


class ToolPermissionsSerializer(serializers.Serializer):
    toolPermissions = ToolPermissionSerializer(many=True, help_text="Oldest first.")


class ToolPermissionRevokedSerializer(serializers.Serializer):
    revoked = serializers.BooleanField(help_text="Always true: the tool's next call is asked.")


class ExportAccountSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField(allow_blank=True)
    dateJoined = serializers.DateTimeField()
    instructions = InstructionsSerializer(help_text="Your standing instructions to the agent (the account page).")


class ExportSerializer(serializers.Serializer):
    """The export document (docs/data-lifecycle.md); written as a stream, described here for the schema."""

    format = serializers.ChoiceField(choices=[FORMAT])
    exportedAt = serializers.DateTimeField()
    account = ExportAccountSerializer()
    conversations = ExportConversationSerializer(many=True)
    schedules = PlanSerializer(many=True)
    webhooks = EndpointSerializer(many=True, help_text="Without their signing secrets.")
    toolPermissions = ToolPermissionSerializer(many=True, help_text="The tools the account always allows.")
