"""ICA v1 REST endpoints of the runtime: thin, validation at the edge, work in services."""

import uuid

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import StrictSerializer, validated
from core.views import IcaAPIView
from runtime import attempts, limits, selectors
from runtime.execution import retries
from runtime.http.history_serializers import ConversationPageSerializer, TaskConversationPageSerializer
from runtime.http.serializers import (
    ConversationDeletedSerializer,
    ConversationListQuerySerializer,
    ConversationListSerializer,
    ConversationPageQuerySerializer,
    ConversationRenameSerializer,
    ConversationSerializer,
    ConversationSettingsOutSerializer,
    ConversationSettingsSerializer,
    MessageCommandSerializer,
    MessageReceiptSerializer,
    RegenerateCommandSerializer,
    RegenerateReceiptSerializer,
    RetryCommandSerializer,
    SubmissionSerializer,
    TaskCreateSerializer,
    TaskListSerializer,
    TaskReceiptSerializer,
)
from runtime.services import commands, regeneration, tombstones
from tools.selectors import approval_to_wire
from tools.serializers import ToolApprovalAnswerSerializer, ToolApprovalSerializer

# Examples of the main bodies, as the API docs page (/api/docs/) shows them.
MESSAGE_EXAMPLES = [
    OpenApiExample(
        "A message",
        request_only=True,
        value={
            "clientMessageId": "3f0c6a52-2f7e-4c8e-9a51-0d1f6c1e2b7a",
            "text": "What is on my list for today?",
            "clientContext": {"timeZone": "Europe/Berlin", "currentDate": "2026-12-06T09:30:00+01:00"},
        },
    ),
    OpenApiExample(
        "Its receipt",
        response_only=True,
        status_codes=["202"],
        value={
            "userMessageId": "9b2d7c1e-5a43-4f0e-8f61-2c7d9e0a4b15",
            "replyMessageId": "e63b2a0c-9d4f-4a87-bc35-7b0f4d8e2a19",
            "messageId": "9b2d7c1e-5a43-4f0e-8f61-2c7d9e0a4b15",
            "submissionId": "c41f0e8a-7b2d-4e65-9a13-5f8d2b6c0e97",
        },
    ),
]
TASK_EXAMPLES = [
    OpenApiExample(
        "A task",
        request_only=True,
        value={"clientMessageId": "8e1d2c3b-4a5f-4e6d-9c7b-1a2b3c4d5e6f", "text": "Sort the holiday photos by place"},
    )
]
REGENERATE_EXAMPLES = [
    OpenApiExample(
        "Regenerate",
        request_only=True,
        value={"clientMessageId": "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"},
    ),
    OpenApiExample(
        "Its receipt",
        response_only=True,
        status_codes=["202"],
        value={
            "submissionId": "d52a1f9b-8c3e-4f76-ab24-6a9e3c7d1f08",
            "messageId": "e63b2a0c-9d4f-4a87-bc35-7b0f4d8e2a19",
            "replyMessageId": "e63b2a0c-9d4f-4a87-bc35-7b0f4d8e2a19",
            "userMessageId": "7a1c6b0d-4e32-4d9f-8e50-1b6c8d9f3a04",
            "replacedMessageId": "9b2d7c1e-5a43-4f0e-8f61-2c7d9e0a4b15",
            "attempt": 2,
        },
    ),
]
RENAME_EXAMPLES = [OpenApiExample("A new title", request_only=True, value={"title": "Holiday photos"})]
APPROVAL_EXAMPLES = [
    OpenApiExample(
        "Approve",
        request_only=True,
        value={"decision": "approve", "clientDecisionId": "5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f"},
    ),
    OpenApiExample(
        "Always allow for this tool",
        request_only=True,
        value={"decision": "approve", "remember": True, "clientDecisionId": "7f8091a2-3c4d-4e5f-8a1b-2c3d4e5f6071"},
    ),
    OpenApiExample(
        "Deny, with a reason the agent reads",
        request_only=True,
        value={"decision": "deny", "reason": "Not now.", "clientDecisionId": "6e7f8091-2b3c-4d4e-9f0a-1b2c3d4e5f60"},
    ),
]

# Commands that start a run are limited per user (429 rate_limited with Retry-After).
ADMISSION_ERRORS = (*WRITE_ERRORS, 429)
# A message's `attachmentIds` (docs/api.md "Messages with files").
FILE_ERRORS = (ErrorCode.INVALID_ATTACHMENTS, ErrorCode.UPLOAD_INCOMPLETE)


def _message_receipt(receipt: commands.Receipt) -> dict:
    return {
        "userMessageId": str(receipt.user_message_id),
        "replyMessageId": str(receipt.reply_message_id),
        "messageId": str(receipt.user_message_id),  # the first name, kept for clients that read it
        "submissionId": str(receipt.submission_id),
    }


def _settings_of(conversation_id, policy: str) -> dict:
    return {"conversationId": str(conversation_id), "messagePolicy": policy}


def _page_of(conversation, query: dict) -> dict:
    return selectors.conversation_page(conversation, after_sequence=query["afterSequence"], limit=query["limit"])


class MainChatMessagesView(IcaAPIView):
    @extend_schema(
        examples=MESSAGE_EXAMPLES,
        request=MessageCommandSerializer,
        responses=responses(
            {202: MessageReceiptSerializer},
            404,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.RUN_IN_PROGRESS,
            *ADMISSION_ERRORS,
            *FILE_ERRORS,
        ),
    )
    def post(self, request):
        command = MessageCommandSerializer.validated(request.data).to_command()
        with limits.admission(request.user, command.client_message_id) as admission:
            receipt = commands.submit_main_chat_message(owner=request.user, command=command, admission=admission)
        return Response(_message_receipt(receipt), status=202)


class MainChatConversationView(IcaAPIView):
    query_serializer = ConversationPageQuerySerializer

    @extend_schema(
        parameters=[ConversationPageQuerySerializer], responses=responses({200: ConversationPageSerializer}, 400)
    )
    def get(self, request):
        # A GET that writes: a client needs Main Chat's id before a first message; get_or_create is idempotent.
        conversation = commands.ensure_main_conversation(request.user)
        return Response(_page_of(conversation, self.query))

    @extend_schema(
        request=ConversationSettingsSerializer,
        responses=responses({200: ConversationSettingsOutSerializer}, *WRITE_ERRORS),
    )
    def patch(self, request):
        policy = validated(ConversationSettingsSerializer, request.data).validated_data.get("messagePolicy")
        conversation = commands.ensure_main_conversation(request.user)
        if policy is None:
            return Response(_settings_of(conversation.id, conversation.message_policy))
        commands.set_message_policy(conversation_id=conversation.id, policy=policy)
        return Response(_settings_of(conversation.id, policy))

    @extend_schema(
        request=None,
        responses=responses({202: ConversationDeletedSerializer}, 503),
        description="Clears Main Chat: its conversation is deleted as a Task's is (`DELETE /api/v1/tasks/{taskId}`),"
        " and the next message or read opens a new, empty one with a fresh session. Idempotent.",
    )
    def delete(self, request):
        tombstones.clear_main_chat(owner=request.user)
        return Response({"deleted": True}, status=202)


class ConversationsView(IcaAPIView):
    query_serializer = ConversationListQuerySerializer

    @extend_schema(
        operation_id="v1_conversations_list",
        parameters=[ConversationListQuerySerializer],
        responses=responses({200: ConversationListSerializer}, 400),
        description="The owner's chats (Main Chat and every Task), newest activity first; with `query`, those"
        " whose title or any message matches (PostgreSQL full-text search over the owner's own chats only).",
    )
    def get(self, request):
        query = self.query
        return Response(
            selectors.conversations_for_owner(
                request.user, query=query["query"], offset=query["offset"], limit=query["limit"]
            )
        )


class ConversationView(IcaAPIView):
    @extend_schema(operation_id="v1_conversations_retrieve", responses=responses({200: ConversationSerializer}, 404))
    def get(self, request, conversation_id: uuid.UUID):
        return Response(selectors.conversation_for_owner(request.user, conversation_id))

    @extend_schema(
        examples=RENAME_EXAMPLES,
        request=ConversationRenameSerializer,
        responses=responses({200: ConversationSerializer}, 404, *WRITE_ERRORS),
        description="Renames the chat (a Task's title follows).",
    )
    def patch(self, request, conversation_id: uuid.UUID):
        title = validated(ConversationRenameSerializer, request.data).validated_data["title"]
        commands.rename_conversation(owner=request.user, conversation_id=conversation_id, title=title)
        return Response(selectors.conversation_for_owner(request.user, conversation_id))


class TasksView(IcaAPIView):
    @extend_schema(responses=responses({200: TaskListSerializer}))
    def get(self, request):
        return Response({"tasks": [selectors.task_to_wire(task) for task in selectors.tasks_for_owner(request.user)]})

    @extend_schema(
        examples=TASK_EXAMPLES,
        request=TaskCreateSerializer,
        responses=responses(
            {202: TaskReceiptSerializer}, ErrorCode.IDEMPOTENCY_CONFLICT, *ADMISSION_ERRORS, *FILE_ERRORS
        ),
    )
    def post(self, request):
        serializer = TaskCreateSerializer.validated(request.data)
        command = serializer.to_command()
        title = serializer.validated_data.get("title")
        with limits.admission(request.user, command.client_message_id) as admission:
            receipt = commands.create_task(owner=request.user, command=command, title=title, admission=admission)
        return Response(
            {
                "taskId": str(receipt.task_id),
                "conversationId": str(receipt.conversation_id),
                **_message_receipt(receipt),
            },
            status=202,
        )


class TaskView(IcaAPIView):
    @extend_schema(
        request=None,
        responses=responses({202: ConversationDeletedSerializer}, 404, 503),
        description="Deletes the Task and its conversation: active replies are cancelled, and from now on the task,"
        " its history, submissions and streams are 404 (open sockets close with 4404). Its sessions at the agent"
        " provider and its stored rows are removed in the background. Idempotent: a repeat is answered the same.",
    )
    def delete(self, request, task_id: uuid.UUID):
        tombstones.delete_task(owner=request.user, task_id=task_id)
        return Response({"deleted": True}, status=202)


class TaskMessagesView(IcaAPIView):
    @extend_schema(
        request=MessageCommandSerializer,
        responses=responses(
            {202: MessageReceiptSerializer},
            404,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.RUN_IN_PROGRESS,
            *ADMISSION_ERRORS,
            *FILE_ERRORS,
        ),
    )
    def post(self, request, task_id: uuid.UUID):
        command = MessageCommandSerializer.validated(request.data).to_command()
        with limits.admission(request.user, command.client_message_id) as admission:
            receipt = commands.submit_task_message(
                owner=request.user, task_id=task_id, command=command, admission=admission
            )
        return Response(_message_receipt(receipt), status=202)


class TaskConversationView(IcaAPIView):
    query_serializer = ConversationPageQuerySerializer

    @extend_schema(
        parameters=[ConversationPageQuerySerializer],
        responses=responses({200: TaskConversationPageSerializer}, 400, 404),
    )
    def get(self, request, task_id: uuid.UUID):
        task = selectors.task_for_owner(request.user, task_id)
        return Response({"taskId": str(task.id), "title": task.title, **_page_of(task.conversation, self.query)})

    @extend_schema(
        request=ConversationSettingsSerializer,
        responses=responses({200: ConversationSettingsOutSerializer}, 404, *WRITE_ERRORS),
    )
    def patch(self, request, task_id: uuid.UUID):
        policy = validated(ConversationSettingsSerializer, request.data).validated_data.get("messagePolicy")
        task = selectors.task_for_owner(request.user, task_id)
        if policy is None:
            return Response(_settings_of(task.conversation_id, task.conversation.message_policy))
        commands.set_message_policy(conversation_id=task.conversation_id, policy=policy)
        return Response(_settings_of(task.conversation_id, policy))


class RegenerateView(IcaAPIView):
    @extend_schema(
        examples=REGENERATE_EXAMPLES,
        request=RegenerateCommandSerializer,
        responses=responses(
            {202: RegenerateReceiptSerializer},
            404,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.RUN_IN_PROGRESS,
            ErrorCode.NOT_REGENERABLE,
            *ADMISSION_ERRORS,
        ),
        description="Regenerates the last reply of a conversation (Main Chat or a Task): a new attempt at the same"
        " user message, its reply the conversation's next message, run in a fresh provider session that never saw"
        " the reply it replaces. The replaced reply is kept: history lists every attempt (`attempt`,"
        " `attemptIds`). 409 `not_regenerable` unless the reply is the conversation's last message and has ended;"
        " 409 `run_in_progress` while a run of the conversation is unfinished.",
    )
    def post(self, request, message_id: uuid.UUID):
        return command_on_message(
            request,
            message_id,
            RegenerateCommandSerializer,
            regeneration.regenerate_reply,
            attempts.regeneration_to_wire,
        )


def command_on_message(request, message_id: uuid.UUID, serializer, admit, receipt_to_wire) -> Response:
    """A command on one of the owner's messages (regenerate, edit): its body read, admitted by `admit` under the
    owner's limits, and answered 202 with `receipt_to_wire` of its submission (a replay's too)."""
    command = validated(serializer, request.data).to_command()
    with limits.admission(request.user, command.client_message_id) as admission:
        receipt = admit(owner=request.user, message_id=message_id, command=command, admission=admission)
    return Response(receipt_to_wire(receipt.submission_id), status=202)


class SubmissionView(IcaAPIView):
    @extend_schema(responses=responses({200: SubmissionSerializer}, 404))
    def get(self, request, submission_id: uuid.UUID):
        submission = selectors.submission_for_owner(request.user, submission_id)
        return Response(selectors.submission_to_wire(submission))


class EmptyBodySerializer(StrictSerializer):
    """`{}`: the cancel command carries nothing, and anything else is a client mistake."""


class SubmissionCancelView(IcaAPIView):
    @extend_schema(request=EmptyBodySerializer, responses=responses({200: SubmissionSerializer}, 404, *WRITE_ERRORS))
    def post(self, request, submission_id: uuid.UUID):
        validated(EmptyBodySerializer, request.data)
        commands.request_cancel(owner=request.user, submission_id=submission_id)
        return Response(selectors.submission_to_wire(selectors.submission_for_owner(request.user, submission_id)))


class SubmissionRetryView(IcaAPIView):
    @extend_schema(
        request=RetryCommandSerializer,
        responses=responses({202: SubmissionSerializer}, 404, ErrorCode.NOT_RETRYABLE, *WRITE_ERRORS),
        description='The owner\'s "Try again" on a failed reply: the same submission is queued as a new attempt'
        " (its input sent again under a new provider key), as staff's retry does; the reply's text and error are"
        " cleared and `submission.accepted` is projected again. 409 `not_retryable` unless the run failed.",
    )
    def post(self, request, submission_id: uuid.UUID):
        client_retry_id = validated(RetryCommandSerializer, request.data).validated_data["clientRetryId"]
        retries.owner_retry_failed_run(owner=request.user, submission_id=submission_id, client_retry_id=client_retry_id)
        submission = selectors.submission_for_owner(request.user, submission_id)
        return Response(selectors.submission_to_wire(submission), status=202)


class ToolCallApprovalView(IcaAPIView):
    """Approve, deny or edit a call waiting for its owner (docs/api.md "Tool approval"); any device, any time."""

    @extend_schema(
        examples=APPROVAL_EXAMPLES,
        request=ToolApprovalAnswerSerializer,
        responses=responses(
            {200: ToolApprovalSerializer},
            404,
            ErrorCode.ALWAYS_ALLOW_NOT_OFFERED,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.APPROVAL_CONFLICT,
            ErrorCode.APPROVAL_EXPIRED,
            ErrorCode.APPROVAL_CANCELLED,
            *WRITE_ERRORS,
        ),
    )
    def post(self, request, tool_call_id: uuid.UUID):
        answer = validated(ToolApprovalAnswerSerializer, request.data).to_answer()
        approval, replayed = commands.answer_tool_approval(owner=request.user, tool_call_id=tool_call_id, answer=answer)
        return Response({**approval_to_wire(approval), "replayed": replayed})
