"""The export: everything an account holds, as one JSON document written in pieces (docs/data-lifecycle.md).

In the accounts app, above the others, because the document spans apps that may not import each other (runtime
below webhooks and scheduling); each app shapes its own part through its selectors. The account is never loaded
at once: the document is written page by page (keyset pages of conversations, messages, plans and endpoints),
each page read in a short query of its own on a pooled connection that goes back at once, so a slow download
holds no connection and a large account costs the memory of one page. Secrets (webhook signing secrets, tokens,
passwords) are left out.
"""

import base64
import json
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from attachments.selectors import ready_files_after
from attachments.storage import store
from rebyte.models import OWNER_INSTRUCTIONS_MAX_CHARS
from rebyte.owner_instructions import instructions_of
from runtime.history import messages_to_wire
from runtime.models import Conversation, Message
from scheduling.models import Plan
from scheduling.selectors import plan_to_wire
from tools.permissions import permissions_to_wire
from tools.selectors import receipts_by_assistant_message
from webhooks.models import WebhookEndpoint
from webhooks.selectors import endpoint_to_wire

FORMAT = "impo.export.v1"
CONVERSATIONS_PAGE = 50
MESSAGES_PAGE = 500
OTHER_PAGE = 200
FILES_PAGE = 20
# A file's bytes are read and encoded a piece at a time; a multiple of 3 bytes, so the pieces' base64 join into one.
FILE_PIECE_BYTES = 3 * 64 * 1024


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
    return {
        "username": user.username,
        "email": user.email,
        "dateJoined": user.date_joined.isoformat(),
        "instructions": instructions_to_wire(owner_id),
    }


def instructions_to_wire(owner_id) -> dict:
    """The owner's standing instructions to their agent, as the account API and the export show them."""
    instructions = instructions_of(owner_id)
    updated_at = instructions.updated_at.isoformat() if instructions.updated_at else None
    return {"text": instructions.text, "maxLength": OWNER_INSTRUCTIONS_MAX_CHARS, "updatedAt": updated_at}


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
    plans = Plan.objects.filter(owner_id=owner_id, deleted_at__isnull=True)
    return [((plan.created_at, plan.id), plan_to_wire(plan)) for plan in _page_after(plans, last, OTHER_PAGE)]


def _endpoints_after(owner_id, last: tuple | None) -> list[tuple[tuple, dict]]:
    endpoints = _page_after(WebhookEndpoint.objects.filter(owner_id=owner_id), last, OTHER_PAGE)
    return [((endpoint.created_at, endpoint.id), endpoint_to_wire(endpoint)) for endpoint in endpoints]


def _joined(items: list[dict], first: bool) -> tuple[str, bool]:
    """The items as JSON array elements, with the comma a previous page needs; and whether none was written yet."""
    if not items:
        return "", first
    return ("" if first else ",") + ",".join(_json(item) for item in items), False


async def _content_base64(key: str) -> AsyncIterator[str]:
    """A stored object's bytes as base64, a piece at a time (a file is at most IMPO_ATTACHMENT_MAX_BYTES)."""
    handle = await sync_to_async(store().open)(key, "rb")
    try:
        while piece := await sync_to_async(handle.read)(FILE_PIECE_BYTES):
            yield base64.b64encode(piece).decode("ascii")
    finally:
        await sync_to_async(handle.close)()


async def _files(owner_id) -> AsyncIterator[str]:
    """The owner's ready files, each with its bytes: metadata first, then `contentBase64` written as it is read."""
    after, first = 0, True
    while page := await database_sync_to_async(ready_files_after)(owner_id, after, FILES_PAGE):
        for file_id, key, wire in page:
            yield ("" if first else ",") + _json(wire)[:-1] + ',"contentBase64":"'
            first = False
            async for piece in _content_base64(key):
                yield piece
            yield '"}'
            after = file_id


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
    yield '],"files":['
    async for piece in _files(owner.id):
        yield piece
    for name, reader in (("schedules", _plans_after), ("webhooks", _endpoints_after)):
        yield f'],"{name}":['
        last, first = None, True
        while page := await read(reader)(owner.id, last):
            text, first = _joined([wire for _, wire in page], first)
            yield text
            last = page[-1][0]
    yield f'],"toolPermissions":{_json(await read(permissions_to_wire)(owner.id))}}}'
