"""Editing the last user message of a conversation (docs/api.md "Edit"): a new version of the user's words, answered
as a branch of its own.

An edit is a command like a message: admitted once per `clientMessageId` (a replay answers the original receipt),
durable before it is acknowledged, counted against the owner's rate and active-run cap. It adds a new user message
(the conversation's next message, pointing at the first version of the one edited), its reply, a submission and a
queued run, all in one transaction; the edited version and its replies stay as they are, an earlier branch. Its run
starts a fresh provider session seeded with the carry of the turns before the edited message, so the provider never
sees the old words (`runtime.execution.driver`).

Admitted only for a version of the conversation's last exchange's user message (the one the last message answers),
once that reply has ended and no run of the conversation is unfinished, whatever the message policy: as with
Regenerate, interrupting is Stop, then Edit. Those checks are made under the conversation's lock, so two edits of
one message cannot both pass them.
"""

import uuid

from django.db import connection

from attachments import services as attachment_services
from attachments.selectors import file_part, files_by_message
from core.error_codes import ErrorCode
from core.errors import Conflict, NotFound
from runtime import limits
from runtime.events import sequence_allocation
from runtime.models import (
    TERMINAL_RUN_STATES,
    Message,
    MessageRole,
    MessageStatus,
    Submission,
)
from runtime.services.admission import MessageCommand
from runtime.services.commands import Receipt, admit_once
from runtime.services.regeneration import admit_reply, check_limits, lock_live_conversation


def edit_message(
    *, owner, message_id: uuid.UUID, command: MessageCommand, admission: limits.Admission | None = None
) -> Receipt:
    """Admits `command.text` as a new version of the owner's user message `message_id` (another user's message is
    not found), under `admission`'s limits (none without one). A replay is answered by `admit_once`: its own version
    is then the last exchange's, so its insert is refused here or by the unique client id, never made twice."""
    fingerprint = command.fingerprint(f"edit:{message_id}")

    def admit(active_run_cap: int | None) -> Receipt:
        return _edit(owner, message_id, command, fingerprint, active_run_cap)

    return admit_once(owner, command, fingerprint, admit, admission)


def _edit(owner, message_id, command: MessageCommand, fingerprint: str, active_run_cap: int | None) -> Receipt:
    edited = (
        Message.objects.filter(
            id=message_id, role=MessageRole.USER, conversation__owner=owner, conversation__deleted_at__isnull=True
        )
        .select_related("conversation__task")
        .first()
    )
    if edited is None:
        raise NotFound("No such message.")
    conversation = edited.conversation
    lock_live_conversation(conversation, verb="edit", missing="No such message.")
    last = (
        Submission.objects.filter(
            conversation_id=conversation.id, assistant_message__sequence=conversation.last_message_sequence
        )
        .select_related("run", "user_message")
        .first()
    )
    first_version_id = edited.first_version_id or edited.id
    if last is None or (last.user_message.first_version_id or last.user_message_id) != first_version_id:
        raise Conflict("Only the last message of a conversation can be edited.", code=ErrorCode.EDIT_NOT_LAST)
    if last.run.state not in TERMINAL_RUN_STATES:  # parked for reconciliation: it may still end
        raise Conflict(
            "The last reply has not ended yet; edit once it has.",
            code=ErrorCode.RUN_IN_PROGRESS,
            details={"activeSubmissionId": str(last.id)},
        )
    check_limits(owner, command, active_run_cap)
    submission = _admit_version(owner, edited, first_version_id, command, fingerprint)
    return Receipt.of(submission, conversation)


def _admit_version(owner, edited: Message, first_version_id, command: MessageCommand, fingerprint: str) -> Submission:
    """The new version and its reply (the conversation's next two messages); its `submission.accepted` names the
    version edited."""
    with connection.cursor() as cursor:
        cursor.execute(sequence_allocation("c.id = %s", events="0", messages="2"), [edited.conversation_id])
        _, _, sequence = cursor.fetchone()
    version = Message.objects.create(
        conversation_id=edited.conversation_id,
        sequence=sequence - 1,
        role=MessageRole.USER,
        text=command.text,
        status=MessageStatus.COMPLETED,
        first_version_id=first_version_id,
    )
    # The new words go with the files the edited version showed (an edit changes the words, not the files).
    files = files_by_message([edited.id]).get(edited.id, [])
    attachment_services.attach_to_message(version.id, files)
    versions = Message.objects.filter(first_version_id=first_version_id).count() + 1  # the first one's own is null
    return admit_reply(
        owner,
        version,
        sequence=sequence,
        command=command,
        fingerprint=fingerprint,
        client_context=command.client_context,
        file_parts=[file_part(attachment) for attachment in files],
        told={"editsMessageId": str(edited.id), "version": versions},
    )
