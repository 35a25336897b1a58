"""Boundary validation for runtime commands (ICA v1, docs/design.md §2 input rules)."""

from datetime import datetime

from django.conf import settings
from rest_framework import serializers

from core.error_codes import ErrorCode
from core.errors import refused_fields
from core.openapi import RunErrorCodeField
from core.serializers import CleanTextField, StrictSerializer, StrictUUIDField
from core.time_zones import iana_time_zone_names
from runtime.models import ConversationKind, MessagePolicy, RunState
from runtime.selectors import TASK_STATUSES
from runtime.services.admission import MessageCommand
from runtime.services.commands import TASK_TITLE_MAX

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


class MessageTextField(CleanTextField):
    """A message's text, which may be blank here: the message's serializer refuses blank text unless files are
    attached (docs/api.md "Messages with files")."""

    def __init__(self, **kwargs):
        super().__init__(required=False, default="", allow_blank=True, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and not data.strip():
            return data
        return super().to_internal_value(data)


class MessageCommandSerializer(StrictSerializer):
    clientMessageId = CleanTextField(max_length=CLIENT_MESSAGE_ID_MAX)
    text = MessageTextField(
        max_length=MESSAGE_TEXT_MAX, help_text="Nonblank, unless `attachmentIds` names at least one file."
    )
    attachmentIds = serializers.ListField(
        child=StrictUUIDField(),
        required=False,
        help_text="The sender's completed files (POST /api/v1/attachments/{id}/complete), in the order shown: at"
        " most `maxFiles` (GET /api/v1/attachments), each once. A bad list is 400 `invalid_attachments` (another"
        " user's id looks like an unknown one); a file not yet completed is 409 `upload_incomplete`.",
    )
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

    @classmethod
    def validated(cls, data) -> "MessageCommandSerializer":
        """The bound serializer once `data` passes; a refusal of `attachmentIds` alone is 400 `invalid_attachments`,
        any other 400 `invalid_request`."""
        serializer = cls(data=data)
        if not serializer.is_valid():
            errors = serializer.errors
            only_files = set(errors) == {"attachmentIds"}
            raise refused_fields(errors, ErrorCode.INVALID_ATTACHMENTS if only_files else ErrorCode.INVALID_REQUEST)
        return serializer

    def validate_attachmentIds(self, value: list) -> list:
        if len(value) > settings.IMPO_ATTACHMENT_MAX_FILES:
            raise serializers.ValidationError(f"At most {settings.IMPO_ATTACHMENT_MAX_FILES} files.")
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Each file at most once.")
        return value

    def validate(self, data: dict) -> dict:
        if not data["text"].strip() and not data.get("attachmentIds"):
            raise serializers.ValidationError({"text": "Must not be blank (unless files are attached)."})
        return data

    def to_command(self) -> MessageCommand:
        # Whose device `deviceId` names, and whose files `attachmentIds` name, is checked by admission itself
        # (another user's is not found).
        data = self.validated_data
        return MessageCommand(
            client_message_id=data["clientMessageId"],
            text=data["text"],
            device_id=data.get("deviceId"),
            client_context=dict(data.get("clientContext") or {}),
            message_policy=data.get("messagePolicy"),
            attachment_ids=tuple(data.get("attachmentIds") or ()),
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


class EditCommandSerializer(MessageCommandSerializer):
    """An edit is a message's words again, in place of the last ones: it follows no policy (it is refused while a
    reply runs), and the new version shows the files the edited one showed, so it names none."""

    messagePolicy = None
    attachmentIds = None


class TaskCreateSerializer(MessageCommandSerializer):
    """A task runs in the background, never on a device: it takes no `deviceId`."""

    text = MessageTextField(
        max_length=TASK_FIRST_MESSAGE_MAX, help_text="Nonblank, unless `attachmentIds` names at least one file."
    )
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
    userMessageId = serializers.UUIDField(help_text="The message sent: the user's.")
    replyMessageId = serializers.UUIDField(
        help_text="The reply its run writes (the submission's `replyMessageId`; what Regenerate takes)."
    )
    messageId = serializers.UUIDField(
        help_text="Deprecated, kept for compatibility: the same as `userMessageId` (the submission's `messageId` is"
        " the reply's, hence the two names above)."
    )
    submissionId = serializers.UUIDField()


class RegenerateReceiptSerializer(serializers.Serializer):
    submissionId = serializers.UUIDField(help_text="The new attempt's submission (status, stream, cancel, retry).")
    messageId = serializers.UUIDField(help_text="The new reply: the conversation's last message.")
    replyMessageId = serializers.UUIDField(help_text="The same as `messageId`, named as in the message receipt.")
    userMessageId = serializers.UUIDField(help_text="The user message every attempt answers.")
    replacedMessageId = serializers.UUIDField(help_text="The reply it replaces, kept as an earlier attempt.")
    attempt = serializers.IntegerField(min_value=2, help_text="Its number among the attempts, the first reply's 1.")


class EditReceiptSerializer(serializers.Serializer):
    submissionId = serializers.UUIDField(help_text="The new version's submission (status, stream, cancel, retry).")
    messageId = serializers.UUIDField(help_text="The new version of the user message (kept for compatibility).")
    userMessageId = serializers.UUIDField(help_text="The new version of the user message.")
    replyMessageId = serializers.UUIDField(help_text="Its reply: the conversation's last message.")
    previousVersionId = serializers.UUIDField(help_text="The version before it, kept with its replies.")
    version = serializers.IntegerField(min_value=2, help_text="Its number among the versions, the first message's 1.")


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
    messageId = serializers.UUIDField(
        help_text="Deprecated, kept for compatibility: the same as `replyMessageId` (the receipt's `messageId` is"
        " the user's)."
    )
    userMessageId = serializers.UUIDField(help_text="The user's message.")
    replyMessageId = serializers.UUIDField(help_text="The assistant message: the reply.")
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
    runState = serializers.ChoiceField(
        choices=RunState.choices,
        allow_null=True,
        help_text="Its latest run's own state (`waiting_approval`: it needs its owner's answer); null before its first"
        " message.",
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
