"""The owner's rating of a reply: thumbs up, down, or none (docs/api.md "Feedback"). Changeable at any time; one
statement, so no lock: the last rating written is the rating."""

import uuid

from django.db import transaction
from django.utils import timezone

from core.errors import NotFound
from runtime.models import Feedback, Message, MessageRole


@transaction.atomic(durable=True)
def rate_reply(*, owner, message_id: uuid.UUID, rating: Feedback | None) -> None:
    """Sets the owner's rating of their reply `message_id` (None takes it back). Another user's message, a user
    message, or one in a deleted conversation is 404: there is no such reply to rate."""
    rated = Message.objects.filter(
        id=message_id,
        role=MessageRole.ASSISTANT,
        conversation__owner=owner,
        conversation__deleted_at__isnull=True,
    ).update(feedback=rating or "", updated_at=timezone.now())
    if not rated:
        raise NotFound("No such reply.")
