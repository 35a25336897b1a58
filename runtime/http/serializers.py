"""Boundary validation for runtime commands (ICA v1, docs/design.md §2 input rules)."""

from datetime import datetime

from rest_framework import serializers

from impo.core.openapi import RunErrorCodeField, ToolErrorCodeField
from impo.core.serializers import CleanTextField, StrictSerializer, StrictUUIDField
from impo.core.time_zones import iana_time_zone_names
from runtime.models import ConversationKind, MessagePolicy, MessageRole, MessageStatus, RunState
from runtime.selectors import TASK_STATUSES
from runtime.services.admission import MessageCommand
from runtime.services.commands import TASK_TITLE_MAX
from tools.models import ApprovalOutcome, ApprovalStatus

MESSAGE_TEXT_MAX = 32_768
TASK_FIRST_MESSAGE_MAX = 4_000
CLIENT_MESSAGE_ID_MAX = 256


class OffsetTimestampField(CleanTextField):
    """An ISO 8601 timestamp that says its UTC offset, kept as sent: the client's own wall clock.

    A string only: DRF's CharField would also turn a JSON number into one."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 64)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise serializers.ValidationError("Must be an ISO 8601 timestamp.") from None
        if parsed.utcoffset() is None or "T" not in value:
            raise serializers.ValidationError("Must be an ISO 8601 date and time with its UTC offset.")
        return value


class ClientContextSerializer(StrictSerializer):
    """Both fields are required when the context is sent (docs/design.md §2)."""

    timeZone = serializers.ChoiceField(
        choices=sorted(iana_time_zone_names()),
        error_messages={"invalid_choice": "Must be an IANA time zone name."},
    )
    currentDate = OffsetTimestampField(help_text="The client's current date and time, with its UTC offset.")


class MessageCommandSerializer(StrictSerializer):
    clientMessageId = CleanTextField(max_length=CLIENT_MESSAGE_ID_MAX)
    text = CleanTextField(max_length=MESSAGE_TEXT_MAX)
    deviceId = StrictUUIDField(required=False, allow_null=True)
    clientContext = ClientContextSerializer(required=False, allow_null=True)
    messagePolicy = serializers.ChoiceField(
        choices=MessagePolicy.choices,
        required=False,
        allow_null=True,
        help_text="What this message does while a reply of its conversation is unfinished, instead of the"
        " conversation's `messagePolicy`: `queue` runs it afterwards, `interrupt` cancels the unfinished runs and"
        " runs it, `reject` refuses it with 409 `run_in_progress`. Not part of the command's identity: a replay"
        " gets its original receipt whatever it names.",
    )

    def to_command(self) -> MessageCommand:
        # Whose device `deviceId` names is checked by admission itself (another user's is not found).
        data = self.validated_data
        return MessageCommand(
            client_message_id=data["clientMessageId"],
            text=data["text"],
            device_id=data.get("deviceId"),
            client_context=dict(data.get("clientContext") or {}),
            message_policy=data.get("messagePolicy"),
        )


class RegenerateCommandSerializer(StrictSerializer):
    """A regeneration says no words of its own: the user message is the replaced reply's."""

    clientMessageId = CleanTextField(
        max_length=CLIENT_MESSAGE_ID_MAX,
        help_text="A new id per Regenerate click, in the same space as messages' ids; the same id again is a replay.",
    )
    deviceId = StrictUUIDField(required=False, allow_null=True)
    clientContext = ClientContextSerializer(
        required=False, allow_null=True, help_text="Where and when the client is now; else the replaced reply's."
    )

    def to_command(self) -> MessageCommand:
        data = self.validated_data
        return MessageCommand(
            client_message_id=data["clientMessageId"],
            text="",
            device_id=data.get("deviceId"),
            client_context=dict(data.get("clientContext") or {}),
        )


class TaskCreateSerializer(MessageCommandSerializer):
    """A task runs in the background, never on a device: it takes no `deviceId`."""

    text = CleanTextField(max_length=TASK_FIRST_MESSAGE_MAX)
    title = CleanTextField(max_length=TASK_TITLE_MAX, required=False, allow_null=True)
    # Tasks never run device tools, so a new task names no device (docs/design.md §2): the field is unknown here.
    deviceId = None
    messagePolicy = serializers.ChoiceField(
        choices=MessagePolicy.choices,
        required=False,
        allow_null=True,
        help_text="The new task conversation's `messagePolicy` (default `queue`).",
    )


class ConversationSettingsSerializer(StrictSerializer):
    messagePolicy = serializers.ChoiceField(
        choices=MessagePolicy.choices,
        required=False,
        help_text="Left as it is when absent. What a message sent while a reply is unfinished does: `queue`"
        " (default) runs it afterwards,"
        " `interrupt` cancels the unfinished runs and runs it, `reject` refuses it with 409 `run_in_progress`"
        " (the error carries `activeSubmissionId`). A message's own `messagePolicy` overrides it.",
    )


class ConversationPageQuerySerializer(StrictSerializer):
    afterSequence = serializers.IntegerField(
        min_value=0, default=0, help_text="Return messages with a larger sequence."
    )
    limit = serializers.IntegerField(min_value=1, max_value=100, default=50, help_text="How many messages at most.")


class ConversationListQuerySerializer(StrictSerializer):
    query = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=200,
        help_text="Words to find in the titles and messages (each also as a word's beginning; all must match).",
    )
    offset = serializers.IntegerField(min_value=0, default=0, help_text="Skip this many (the last `nextOffset`).")
    limit = serializers.IntegerField(min_value=1, max_value=100, default=30, help_text="How many at most.")


class ConversationRenameSerializer(StrictSerializer):
    title = CleanTextField(max_length=TASK_TITLE_MAX, help_text="The chat's new title (kept without its outer spaces).")

    def validate_title(self, value):
        return value.strip()


class MessageReceiptSerializer(serializers.Serializer):
    messageId = serializers.UUIDField()
    submissionId = serializers.UUIDField()


class RegenerateReceiptSerializer(serializers.Serializer):
    submissionId = serializers.UUIDField(help_text="The new attempt's submission (status, stream, cancel, retry).")
    messageId = serializers.UUIDField(help_text="The new reply: the conversation's last message.")
    userMessageId = serializers.UUIDField(help_text="The user message every attempt answers.")
    replacedMessageId = serializers.UUIDField(help_text="The reply it replaces, kept as an earlier attempt.")
    attempt = serializers.IntegerField(min_value=2, help_text="Its number among the attempts, the first reply's 1.")


class TaskReceiptSerializer(MessageReceiptSerializer):
    taskId = serializers.UUIDField()
    conversationId = serializers.UUIDField()


# --- outputs: the shapes the views answer with, so the OpenAPI schema states them ---------------------------


class ConversationSettingsOutSerializer(serializers.Serializer):
    conversationId = serializers.UUIDField()
    messagePolicy = serializers.ChoiceField(choices=MessagePolicy.choices)


class ErrorOutSerializer(serializers.Serializer):
    code = RunErrorCodeField()
    message = serializers.CharField()
    retryable = serializers.BooleanField()


class RetryCommandSerializer(StrictSerializer):
    clientRetryId = StrictUUIDField(
        help_text='A new UUID per "Try again" click; the same id again is a replay (202, nothing queued twice).'
    )


class SubmissionSerializer(serializers.Serializer):
    submissionId = serializers.UUIDField()
    messageId = serializers.UUIDField(help_text="The assistant message.")
    userMessageId = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    taskId = serializers.UUIDField(allow_null=True)
    status = serializers.ChoiceField(choices=RunState.choices)
    resultCount = serializers.IntegerField(min_value=0)
    subscriberCount = serializers.IntegerField(min_value=0)
    version = serializers.IntegerField(min_value=0)
    cancelRequested = serializers.BooleanField()
    attempts = serializers.IntegerField(min_value=0)
    error = ErrorOutSerializer(allow_null=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    traceId = serializers.CharField(
        allow_null=True, help_text="The run's OpenTelemetry trace id (32 hex digits); null when tracing was off."
    )


class ToolApprovalStateSerializer(serializers.Serializer):
    approvalId = serializers.UUIDField(help_text="Answered at POST /api/v1/tool-calls/{approvalId}/approval.")
    status = serializers.ChoiceField(choices=ApprovalStatus.choices)
    outcome = serializers.ChoiceField(choices=ApprovalOutcome.choices, allow_null=True)
    expiresAt = serializers.DateTimeField()


class ToolStateSerializer(serializers.Serializer):
    toolCallId = serializers.CharField()
    toolName = serializers.CharField()
    state = serializers.ChoiceField(
        choices=["requested", "awaiting_approval", "accepted", "completed", "failed", "uncertain"]
    )
    errorCode = ToolErrorCodeField(allow_null=True)
    approval = ToolApprovalStateSerializer(allow_null=True)


class HistoryMessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    role = serializers.ChoiceField(choices=MessageRole.choices)
    sequence = serializers.IntegerField(min_value=1)
    text = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=MessageStatus.choices)
    createdAt = serializers.DateTimeField()
    submissionId = serializers.UUIDField(
        allow_null=True,
        help_text="A reply's submission (what `/submissions/{id}/retry` takes); null for a user message.",
    )
    tools = ToolStateSerializer(many=True)
    replyTo = serializers.UUIDField(allow_null=True, help_text="The user message a reply answers; null for a user's.")
    attempt = serializers.IntegerField(
        min_value=1,
        allow_null=True,
        help_text="A reply's number among the attempts at its user message (2 and up: regenerations); null for a"
        " user message.",
    )
    attemptIds = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="Every attempt's reply id, first to last (this one included); the last is the current one."
        " Empty for a user message.",
    )


class ActiveSubmissionSerializer(serializers.Serializer):
    submissionId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=RunState.choices)


class ConversationPageSerializer(serializers.Serializer):
    conversationId = serializers.UUIDField()
    messages = HistoryMessageSerializer(many=True)
    activeSubmissions = ActiveSubmissionSerializer(many=True)
    hasMore = serializers.BooleanField()
    nextAfterSequence = serializers.IntegerField(min_value=0)
    lastEventSeq = serializers.IntegerField(min_value=0)
    eventsCompactedThrough = serializers.IntegerField(
        min_value=0,
        help_text="Every event seq the retention window removed is at or below this (0: none). A websocket resumed"
        " with an `after` below it may be closed with 4410 (`snapshot.reload`): reload this page and resume from"
        " `lastEventSeq`.",
    )
    messagePolicy = serializers.ChoiceField(choices=MessagePolicy.choices)


class TaskConversationPageSerializer(ConversationPageSerializer):
    taskId = serializers.UUIDField()
    title = serializers.CharField()


class TaskSerializer(serializers.Serializer):
    taskId = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=TASK_STATUSES)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    lastRunStartedAt = serializers.DateTimeField(allow_null=True)
    lastRunCompletedAt = serializers.DateTimeField(allow_null=True)


class ConversationSerializer(serializers.Serializer):
    conversationId = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=ConversationKind.choices)
    title = serializers.CharField(help_text="The owner's title; a Task's starts as its first message's first line.")
    taskId = serializers.UUIDField(
        allow_null=True, help_text="The Task this is the conversation of; null for Main Chat."
    )
    status = serializers.ChoiceField(
        choices=TASK_STATUSES, allow_null=True, help_text="Its latest run's status; null before its first message."
    )
    createdAt = serializers.DateTimeField()
    lastActivityAt = serializers.DateTimeField(help_text="When its last message was sent (else when it was made).")


class ConversationListSerializer(serializers.Serializer):
    conversations = ConversationSerializer(many=True)
    nextOffset = serializers.IntegerField(allow_null=True, help_text="The next page's `offset`; null on the last.")


class TaskListSerializer(serializers.Serializer):
    tasks = TaskSerializer(many=True)


class ConversationDeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField(
        help_text="Always true: the conversation is gone for its owner from now on (404 everywhere); its copy at the"
        " agent provider and its stored rows are removed in the background."
    )
