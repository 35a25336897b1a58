"""`GET /api/v1/export`: everything an account holds, as one streamed JSON document (docs/data-lifecycle.md).

Here, at the roof, because the document spans apps that may not import each other (runtime below webhooks and
scheduling); each app shapes its own part through its selectors. The account is never loaded at once: the document
is written page by page (keyset pages of conversations, messages, plans and endpoints), each page read in a short
query of its own on a pooled connection that goes back at once, so a slow download holds no connection and a
large account costs the memory of one page. Secrets (webhook signing secrets, tokens, passwords) are left out.
"""

import json
from collections.abc import AsyncIterator

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers

from impo.core.openapi import responses
from impo.core.views import IcaAPIView
from runtime.http.serializers import HistoryMessageSerializer
from runtime.models import Conversation, ConversationKind, Message, MessagePolicy
from runtime.selectors import messages_to_wire
from scheduling.models import ScheduledTask
from scheduling.selectors import plan_to_wire
from scheduling.serializers import PlanSerializer
from tools.selectors import receipts_by_assistant_message
from webhooks.models import WebhookEndpoint
from webhooks.selectors import endpoint_to_wire
from webhooks.serializers import EndpointSerializer

FORMAT = "impo.export.v1"
CONVERSATIONS_PAGE = 50
MESSAGES_PAGE = 500
OTHER_PAGE = 200


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _page_after(rows, last: tuple | None, size: int) -> list:
    """The next keyset page of `rows` after the (created_at, id) of the last row of the previous page."""
    rows = rows.order_by("created_at", "id")
    if last is not None:
        rows = rows.filter(Q(created_at__gt=last[0]) | Q(created_at=last[0], id__gt=last[1]))
    return list(rows[:size])


def _account(owner_id) -> dict:
    user = get_user_model().objects.only("username", "email", "date_joined").get(id=owner_id)
    return {"username": user.username, "email": user.email, "dateJoined": user.date_joined.isoformat()}


def _conversations_after(owner_id, last: tuple | None) -> list[dict]:
    conversations = Conversation.objects.filter(owner_id=owner_id, deleted_at__isnull=True).select_related("task")
    page = []
    for conversation in _page_after(conversations, last, CONVERSATIONS_PAGE):
        task = getattr(conversation, "task", None)
        page.append(
            {
                "key": (conversation.created_at, conversation.id),
                "wire": {
                    "conversationId": str(conversation.id),
                    "kind": conversation.kind,
                    "taskId": str(task.id) if task else None,
                    "title": task.title if task else conversation.title,
                    "messagePolicy": conversation.message_policy,
                    "createdAt": conversation.created_at.isoformat(),
                },
            }
        )
    return page


def _messages_after(conversation_id, after_sequence: int) -> list[dict]:
    messages = list(
        Message.objects.filter(conversation_id=conversation_id, sequence__gt=after_sequence).order_by("sequence")[
            :MESSAGES_PAGE
        ]
    )
    receipts = receipts_by_assistant_message([message.id for message in messages])
    wire = messages_to_wire(messages)
    for message, shaped in zip(messages, wire, strict=True):
        shaped["receipts"] = receipts.get(message.id, [])
    return wire


def _plans_after(owner_id, last: tuple | None) -> list[tuple[tuple, dict]]:
    plans = ScheduledTask.objects.filter(owner_id=owner_id, deleted_at__isnull=True)
    return [((plan.created_at, plan.id), plan_to_wire(plan)) for plan in _page_after(plans, last, OTHER_PAGE)]


def _endpoints_after(owner_id, last: tuple | None) -> list[tuple[tuple, dict]]:
    endpoints = _page_after(WebhookEndpoint.objects.filter(owner_id=owner_id), last, OTHER_PAGE)
    return [((endpoint.created_at, endpoint.id), endpoint_to_wire(endpoint)) for endpoint in endpoints]


def _joined(items: list[dict], first: bool) -> tuple[str, bool]:
    """The items as JSON array elements, with the comma a previous page needs; and whether none was written yet."""
    if not items:
        return "", first
    return ("" if first else ",") + ",".join(_json(item) for item in items), False


async def document(owner) -> AsyncIterator[str]:
    """The export of `owner`, in pieces, each page read on its own."""
    read = database_sync_to_async
    account = await read(_account)(owner.id)
    yield f'{{"format":{_json(FORMAT)},"exportedAt":{_json(timezone.now().isoformat())},"account":{_json(account)}'
    yield ',"conversations":['
    last, first_conversation = None, True
    while page := await read(_conversations_after)(owner.id, last):
        for conversation in page:
            header = _json(conversation["wire"])[:-1]  # reopened to add its messages
            yield ("" if first_conversation else ",") + header + ',"messages":['
            first_conversation = False
            after, first_message = 0, True
            while messages := await read(_messages_after)(conversation["wire"]["conversationId"], after):
                text, first_message = _joined(messages, first_message)
                yield text
                after = messages[-1]["sequence"]
            yield "]}"
        last = page[-1]["key"]
    for name, reader in (("schedules", _plans_after), ("webhooks", _endpoints_after)):
        yield f'],"{name}":['
        last, first = None, True
        while page := await read(reader)(owner.id, last):
            text, first = _joined([wire for _, wire in page], first)
            yield text
            last = page[-1][0]
    yield "]}"


async def _encoded(pieces: AsyncIterator[str]) -> AsyncIterator[bytes]:
    async for piece in pieces:
        if piece:
            yield piece.encode()


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


class ExportAccountSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField(allow_blank=True)
    dateJoined = serializers.DateTimeField()


class ExportSerializer(serializers.Serializer):
    """The export document (docs/data-lifecycle.md); written as a stream, described here for the schema."""

    format = serializers.ChoiceField(choices=[FORMAT])
    exportedAt = serializers.DateTimeField()
    account = ExportAccountSerializer()
    conversations = ExportConversationSerializer(many=True)
    schedules = PlanSerializer(many=True)
    webhooks = EndpointSerializer(many=True, help_text="Without their signing secrets.")


class ExportView(IcaAPIView):
    @extend_schema(
        responses=responses(
            {
                200: OpenApiResponse(
                    ExportSerializer,
                    description="One JSON document, streamed as it is read (an attachment). See"
                    " docs/data-lifecycle.md.",
                )
            }
        )
    )
    def get(self, request):
        response = StreamingHttpResponse(_encoded(document(request.user)), content_type="application/json")
        stamp = timezone.now().strftime("%Y%m%d")
        response["Content-Disposition"] = f'attachment; filename="impo-export-{stamp}.json"'
        response["Cache-Control"] = "no-store"
        return response
