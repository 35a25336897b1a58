"""The conversation page's shapes (docs/api.md "Messages and tasks"): history's messages with their files, versions,
tools, reasoning and attempts, and the submissions still active, so the OpenAPI schema states them."""

from rest_framework import serializers

from attachments.serializers import FilePartSerializer
from core.openapi import ToolErrorCodeField
from runtime.models import Feedback, MessagePolicy, MessageRole, MessageStatus, RunState
from tools.models import ApprovalOutcome, ApprovalStatus


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


class ReasoningSerializer(serializers.Serializer):
    text = serializers.CharField()
    seconds = serializers.IntegerField(min_value=1)


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
    parts = FilePartSerializer(
        many=True,
        required=False,
        help_text="A user message's files, in the order sent, as `data-instant-file` parts; absent when it has none.",
    )
    version = serializers.IntegerField(
        min_value=1,
        allow_null=True,
        help_text="A user message's number among its versions (2 and up: edits); null for a reply.",
    )
    versionIds = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="Every version's id, first to last (this one included); the last is the current one, and the"
        " messages after an earlier one's replies belong to the current one's branch. Empty for a reply.",
    )
    feedback = serializers.ChoiceField(
        choices=Feedback.choices, allow_null=True, help_text="The owner's rating of a reply (up, down); else null."
    )
    retries = serializers.IntegerField(
        min_value=0, help_text="How often a reply was tried again after it failed (`/submissions/{id}/retry`)."
    )
    reasoning = ReasoningSerializer(
        allow_null=True,
        help_text="A finished reply's reasoning summary (Markdown) and how long the agent thought; null without.",
    )


class ActiveSubmissionSerializer(serializers.Serializer):
    submissionId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=RunState.choices)
    reconnecting = serializers.BooleanField(help_text="It waits out a provider outage (`run.reconnecting`).")
    needsStaff = serializers.BooleanField(
        help_text="Parked on a doubt only a person can settle (`run.pending_reconciliation` with `needsStaff`)."
    )


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
