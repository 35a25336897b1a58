"""Reads of a reply's attempts (docs/api.md "Regenerate") and of a user message's versions (docs/api.md "Edit").

Every submission of one user message is an attempt at its reply: the first one admitted with the message, each
later one a regeneration. Their replies are ordered by their message sequence; the last is the current one, the one
the conversation goes on from (its provider session, the carry of a later session, "Try again").

Likewise every edit of a user message is a version of it, a message of its own (pointing at the first version) with
replies of its own; the last version is the current one, and the turns of an earlier one are history only.
"""

import uuid

from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Coalesce

from runtime.models import Message, Submission


def later_attempt() -> Exists:
    """For a query of submissions: a later attempt at the same user message exists (this one was replaced)."""
    return Exists(
        Submission.objects.filter(
            user_message_id=OuterRef("user_message_id"),
            assistant_message__sequence__gt=OuterRef("assistant_message__sequence"),
        )
    )


def later_version() -> Exists:
    """For a query of submissions: their user message was edited since (a later version of it exists)."""
    return Exists(
        Message.objects.filter(
            first_version_id=Coalesce(OuterRef("user_message__first_version_id"), OuterRef("user_message_id")),
            sequence__gt=OuterRef("user_message__sequence"),
        )
    )


def superseded() -> Q:
    """For a query of submissions: no longer the current turn of its exchange (regenerated, or its message edited)."""
    return Q(later_attempt()) | Q(later_version())


def earlier_attempt(prefix: str = "") -> Exists:
    """For a query of submissions (or of rows that reach one through `prefix`, "submission__"): an earlier attempt at
    the same user message exists, so this one is a regeneration."""
    return Exists(
        Submission.objects.filter(
            user_message_id=OuterRef(f"{prefix}user_message_id"),
            assistant_message__sequence__lt=OuterRef(f"{prefix}assistant_message__sequence"),
        )
    )


def starts_afresh(submission: Submission, *, regeneration: bool) -> str:
    """Why the submission's run needs a provider session of its own, one that never saw what it replaces ('' for no
    reason): a regeneration (`earlier_attempt`, read with the run), or the first reply to an edited message (its user
    message read with it)."""
    if regeneration:
        return "regenerated"
    return "edited" if submission.user_message.first_version_id is not None else ""


def is_replaced(submission: Submission) -> bool:
    return Submission.objects.filter(id=submission.id).filter(superseded()).exists()


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


def version_ids_by_first_version(messages) -> dict[uuid.UUID, list[uuid.UUID]]:
    """{first version's id: every version's id, first to last} of these user messages, in one query."""
    first_ids = {message.first_version_id or message.id for message in messages}
    rows = (
        Message.objects.filter(Q(id__in=first_ids) | Q(first_version_id__in=first_ids))
        .order_by("sequence")
        .values_list("id", "first_version_id")
    )
    versions: dict[uuid.UUID, list[uuid.UUID]] = {}
    for message_id, first_version_id in rows:
        versions.setdefault(first_version_id or message_id, []).append(message_id)
    return versions


NO_VERSIONS = {"version": None, "versionIds": []}  # a reply's: only a user message is edited


def versions_to_wire(user_messages) -> dict[uuid.UUID, dict]:
    """{user message id: its `version` (1 for the first) and `versionIds` (first to last)} as history shows them."""
    user_messages = list(user_messages)
    versions = version_ids_by_first_version(user_messages)
    wire = {}
    for message in user_messages:
        version_ids = versions[message.first_version_id or message.id]
        wire[message.id] = {
            "version": version_ids.index(message.id) + 1,
            "versionIds": [str(version_id) for version_id in version_ids],
        }
    return wire


def regeneration_to_wire(submission_id) -> dict:
    """A regeneration's receipt: its submission, its reply, the user message both answer and the reply it replaced."""
    submission = Submission.objects.get(id=submission_id)
    attempt_ids = attempt_ids_by_user_message([submission.user_message_id])[submission.user_message_id]
    attempt = attempt_ids.index(submission.assistant_message_id) + 1
    return {
        "submissionId": str(submission.id),
        "messageId": str(submission.assistant_message_id),
        "replyMessageId": str(submission.assistant_message_id),
        "userMessageId": str(submission.user_message_id),
        "replacedMessageId": str(attempt_ids[attempt - 2]) if attempt > 1 else None,
        "attempt": attempt,
    }


def edit_to_wire(submission_id) -> dict:
    """An edit's receipt: its submission, the new version of the user message, its number and the version before it."""
    submission = Submission.objects.select_related("user_message").get(id=submission_id)
    version = submission.user_message
    version_ids = version_ids_by_first_version([version])[version.first_version_id]
    number = version_ids.index(version.id) + 1
    return {
        "submissionId": str(submission.id),
        "messageId": str(version.id),
        "userMessageId": str(version.id),
        "replyMessageId": str(submission.assistant_message_id),
        "previousVersionId": str(version_ids[number - 2]),
        "version": number,
    }
