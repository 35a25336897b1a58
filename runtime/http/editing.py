"""`POST /api/v1/messages/{id}/edit` (docs/api.md "Edit"): thin, the work in `runtime.services.editing`."""

import uuid

from drf_spectacular.utils import OpenApiExample, extend_schema

from core.error_codes import ErrorCode
from core.openapi import responses
from core.views import IcaAPIView
from runtime import attempts
from runtime.http.api import ADMISSION_ERRORS, command_on_message
from runtime.http.serializers import EditCommandSerializer, EditReceiptSerializer
from runtime.services import editing

EDIT_EXAMPLES = [
    OpenApiExample(
        "Edit",
        request_only=True,
        value={"clientMessageId": "5b4c3d2e-1f0a-4b9c-8d7e-6f5a4b3c2d1e", "text": "What is on my list for tomorrow?"},
    ),
    OpenApiExample(
        "Its receipt",
        response_only=True,
        status_codes=["202"],
        value={
            "submissionId": "f74c3b1d-0e5a-4b98-8d46-8c1a5e9f3b20",
            "messageId": "a85d4c2e-1f6b-4ca9-9e57-9d2b6f0a4c31",
            "userMessageId": "a85d4c2e-1f6b-4ca9-9e57-9d2b6f0a4c31",
            "replyMessageId": "b96e5d3f-2a7c-4dba-8f68-0e3c7a1b5d42",
            "previousVersionId": "9b2d7c1e-5a43-4f0e-8f61-2c7d9e0a4b15",
            "version": 2,
        },
    ),
]


class EditView(IcaAPIView):
    @extend_schema(
        examples=EDIT_EXAMPLES,
        request=EditCommandSerializer,
        responses=responses(
            {202: EditReceiptSerializer},
            404,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.RUN_IN_PROGRESS,
            ErrorCode.EDIT_NOT_LAST,
            *ADMISSION_ERRORS,
        ),
        description="Edits the user message of a conversation's last exchange (Main Chat or a Task): its new words"
        " are a new version of it, the conversation's next message, answered in a fresh provider session that"
        " carries the turns before it and never saw the old words. The earlier version and its replies are kept:"
        " history lists every version (`version`, `versionIds`). 409 `edit_not_last` for any other message; 409"
        " `run_in_progress` while a run of the conversation is unfinished or the last reply has not ended.",
    )
    def post(self, request, message_id: uuid.UUID):
        return command_on_message(
            request, message_id, EditCommandSerializer, editing.edit_message, attempts.edit_to_wire
        )
