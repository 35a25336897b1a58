"""Reads of a reply's attempts (docs/api.md "Regenerate").

Every submission of one user message is an attempt at its reply: the first one admitted with the message, each
later one a regeneration. Their replies are ordered by their message sequence; the last is the current one, the one
the conversation goes on from (its provider session, the carry of a later session, "Try again").
"""

import uuid

from django.db.models import Exists, OuterRef

from runtime.models import Submission


def later_attempt() -> Exists:
    """For a query of submissions: a later attempt at the same user message exists (this one was replaced)."""
    return Exists(
        Submission.objects.filter(
            user_message_id=OuterRef("user_message_id"),
            assistant_message__sequence__gt=OuterRef("assistant_message__sequence"),
        )
    )


def is_regeneration(submission: Submission) -> bool:
    """Whether an earlier attempt at the submission's user message exists (its assistant message read with it)."""
    return Submission.objects.filter(
        user_message_id=submission.user_message_id,
        assistant_message__sequence__lt=submission.assistant_message.sequence,
    ).exists()


def is_replaced(submission: Submission) -> bool:
    return Submission.objects.filter(id=submission.id).filter(later_attempt()).exists()


def attempt_ids_by_user_message(user_message_ids) -> dict[uuid.UUID, list[uuid.UUID]]:
    """{user message id: its replies' ids, first attempt first}, in one query."""
    rows = (
        Submission.objects.filter(user_message_id__in=list(user_message_ids))
        .order_by("assistant_message__sequence")
        .values_list("user_message_id", "assistant_message_id")
    )
    attempts: dict[uuid.UUID, list[uuid.UUID]] = {}
    for user_message_id, assistant_message_id in rows:
        attempts.setdefault(user_message_id, []).append(assistant_message_id)
    return attempts


def regeneration_to_wire(submission_id) -> dict:
    """A regeneration's receipt: its submission, its reply, the user message both answer and the reply it replaced."""
    submission = Submission.objects.get(id=submission_id)
    attempt_ids = attempt_ids_by_user_message([submission.user_message_id])[submission.user_message_id]
    attempt = attempt_ids.index(submission.assistant_message_id) + 1
    return {
        "submissionId": str(submission.id),
        "messageId": str(submission.assistant_message_id),
        "userMessageId": str(submission.user_message_id),
        "replacedMessageId": str(attempt_ids[attempt - 2]) if attempt > 1 else None,
        "attempt": attempt,
    }
