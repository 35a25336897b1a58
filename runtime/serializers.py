"""Boundary validation for runtime commands (ICA v1 §2 input rules)."""

from rest_framework import serializers

from impo.serializers import CleanTextField, StrictSerializer, StrictUUIDField
from impo.time_zones import iana_time_zone_names
from runtime.services import TASK_TITLE_MAX, MessageCommand

MESSAGE_TEXT_MAX = 32_768
TASK_FIRST_MESSAGE_MAX = 4_000
CLIENT_MESSAGE_ID_MAX = 256


class ClientContextSerializer(StrictSerializer):
    timeZone = serializers.ChoiceField(
        choices=sorted(iana_time_zone_names()),
        required=False,
        allow_null=True,
        error_messages={"invalid_choice": "Must be an IANA time zone name."},
    )
    # A string as sent (DRF's CharField would also turn a JSON number into one).
    currentDate = CleanTextField(required=False, allow_null=True, max_length=64)


class MessageCommandSerializer(StrictSerializer):
    clientMessageId = CleanTextField(max_length=CLIENT_MESSAGE_ID_MAX)
    text = CleanTextField(max_length=MESSAGE_TEXT_MAX)
    deviceId = StrictUUIDField(required=False, allow_null=True)
    clientContext = ClientContextSerializer(required=False, allow_null=True)

    def to_command(self) -> MessageCommand:
        data = self.validated_data
        return MessageCommand(
            client_message_id=data["clientMessageId"],
            text=data["text"],
            device_id=data.get("deviceId"),
            client_context=dict(data.get("clientContext") or {}),
        )


class TaskCreateSerializer(MessageCommandSerializer):
    text = CleanTextField(max_length=TASK_FIRST_MESSAGE_MAX)
    title = CleanTextField(max_length=TASK_TITLE_MAX, required=False, allow_null=True)
    # Tasks never run device tools, so a new task names no device (DESIGN §2): the field is unknown here.
    deviceId = None


class ConversationPageQuerySerializer(StrictSerializer):
    afterSequence = serializers.IntegerField(
        min_value=0, default=0, help_text="Return messages with a larger sequence."
    )
    limit = serializers.IntegerField(min_value=1, max_value=100, default=50, help_text="How many messages at most.")


class MessageReceiptSerializer(serializers.Serializer):
    messageId = serializers.UUIDField()
    submissionId = serializers.UUIDField()


class TaskReceiptSerializer(MessageReceiptSerializer):
    taskId = serializers.UUIDField()
    conversationId = serializers.UUIDField()
