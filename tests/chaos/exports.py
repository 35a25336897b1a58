"""A client's export (`GET /api/v1/export`), kept with what the database said was settled before it started, so
the invariants can tell that the document holds every message of the user that had settled by then."""

from typing import TYPE_CHECKING

import httpx

from devtools.records import ChaosUser, Export
from tests.chaos.clients import request

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

SETTLED_MESSAGE_STATES = ("completed", "failed", "cancelled")


def export(run: "ChaosRun", http: httpx.Client, user: ChaosUser) -> None:
    """Exports the user's data, and keeps it for the invariants."""
    if (kept := _export_of(http, user)) is not None:
        run.exports.append(kept)
        run.figures.commands_by_kind["export"] += 1


def _export_of(http: httpx.Client, user: ChaosUser) -> Export | None:
    """The user's export and what it must hold; None while PostgreSQL cannot say what had settled (restarting)."""
    from django.db import DatabaseError, connection

    from runtime.models import Conversation, Message

    try:
        settled = {
            str(message_id): (str(conversation_id), text)
            for message_id, conversation_id, text in Message.objects.filter(
                conversation__owner_id=user.id,
                conversation__deleted_at__isnull=True,
                status__in=SETTLED_MESSAGE_STATES,
            ).values_list("id", "conversation_id", "text")
        }
    except DatabaseError:
        connection.close()
        return None
    response = request(http, "GET", "/api/v1/export")
    if response.status_code != 200:
        raise AssertionError(f"GET /api/v1/export answered {response.status_code}: {response.text[:300]}")
    document = response.json()
    exported = {
        message["id"]: message["text"]
        for conversation in document["conversations"]
        for message in conversation["messages"]
    }
    conversation_ids = {conversation_id for conversation_id, _ in settled.values()}
    try:
        deleted = Conversation.objects.filter(id__in=conversation_ids, deleted_at__isnull=False)
        deleted_by_then = {str(conversation_id) for conversation_id in deleted.values_list("id", flat=True)}
    except DatabaseError:
        connection.close()
        return None
    return Export(user=user, settled_before=settled, exported=exported, deleted_by_then=deleted_by_then)
