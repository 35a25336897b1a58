"""Regenerating the last reply of a conversation (docs/api.md "Regenerate"): a new attempt at the same user message.

A regeneration is a command like a message: admitted once per `clientMessageId` (a replay answers the original
receipt), durable before it is acknowledged, counted against the owner's rate and active-run cap. It adds a new
assistant message (the next in the conversation), a submission of the same user message and a queued run; the
replaced reply stays as it is, an earlier attempt. Its run starts a fresh provider session that never saw the replaced
reply (`runtime.execution.driver`).

Admitted only when the reply named is its conversation's last message and ended (completed, failed or cancelled), and
no run of the conversation is unfinished, whatever the message policy: queued behind a run, it would replace a reply
that is not yet the last; interrupting one is Stop, then Regenerate. Those checks are made under the conversation's
lock, so two regenerations of one reply cannot both pass them.
"""

import uuid

from django.db import connection
from django.utils import timezone

from attachments.selectors import file_parts_of
from core import telemetry
from core.error_codes import ErrorCode
from core.errors import Conflict, NotFound
from runtime import limits, locks, outbound
from runtime.attempts import attempt_ids_by_user_message
from runtime.events import append_events, sequence_allocation
from runtime.models import (
    COUNTED_RUN_STATES,
    TERMINAL_RUN_STATES,
    UNFINISHED_RUN_STATES,
    EventType,
    Message,
    MessageRole,
    MessageStatus,
    Run,
    Submission,
)
from runtime.services.admission import MessageCommand, accepted_payload
from runtime.services.commands import Receipt, admit_once
from tools.models import Device


def regenerate_reply(
    *, owner, message_id: uuid.UUID, command: MessageCommand, admission: limits.Admission | None = None
) -> Receipt:
    """Admits a new attempt at the reply `message_id` of the owner's (another user's reply is not found), under
    `admission`'s limits (none without one).

    `command` carries the client id and, optionally, the device and client context of the new attempt (its text is
    empty: the user message is the replaced reply's). A replay is answered by `admit_once`: its own reply is then
    the last and its run unfinished or ended, so it is refused here before its insert would be.
    """
    fingerprint = command.fingerprint(f"regenerate:{message_id}")

    def admit(active_run_cap: int | None) -> Receipt:
        return _regenerate(owner, message_id, command, fingerprint, active_run_cap)

    return admit_once(owner, command, fingerprint, admit, admission)


def _regenerate(owner, message_id, command: MessageCommand, fingerprint: str, active_run_cap: int | None) -> Receipt:
    replaced = (
        Submission.objects.filter(assistant_message_id=message_id, owner=owner, conversation__deleted_at__isnull=True)
        .select_related("run", "user_message", "assistant_message", "conversation__task")
        .first()
    )
    if replaced is None:
        raise NotFound("No such reply.")
    conversation = replaced.conversation
    lock_live_conversation(conversation, verb="regenerate", missing="No such reply.")
    replaced.run.refresh_from_db(fields=["state"])
    if replaced.assistant_message.sequence != conversation.last_message_sequence or replaced.run.state not in (
        TERMINAL_RUN_STATES
    ):
        raise Conflict(
            "Only the last reply of a conversation, once it has ended, can be regenerated.",
            code=ErrorCode.NOT_REGENERABLE,
        )
    check_limits(owner, command, active_run_cap)
    return Receipt.of(_admit_attempt(owner, replaced, command, fingerprint), conversation)


def lock_live_conversation(conversation, *, verb: str, missing: str) -> None:
    """Locks `conversation` for a command on its last exchange (`verb`: regenerate, edit): from here until commit
    no run of it starts or ends, and no message is added. 404 (`missing`) when it was deleted since it was read (its
    deletion holds the lock first); 409 `run_in_progress` while a run of it is unfinished. Its last message's
    sequence is read afresh, under the lock."""
    locks.lock_conversation(conversation.id)
    conversation.refresh_from_db(fields=["last_message_sequence", "deleted_at"])
    if conversation.deleted_at is not None:
        raise NotFound(missing)
    refuse_while_unfinished(conversation.id, verb)


def refuse_while_unfinished(conversation_id, verb: str) -> None:
    """409 `run_in_progress` while a run of the conversation is unfinished (under the conversation's lock)."""
    unfinished = (
        Run.objects.filter(submission__conversation_id=conversation_id, state__in=UNFINISHED_RUN_STATES)
        .values_list("submission_id", flat=True)
        .first()
    )
    if unfinished is not None:
        raise Conflict(
            f"A reply is still running in this conversation; {verb} once it has finished.",
            code=ErrorCode.RUN_IN_PROGRESS,
            details={"activeSubmissionId": str(unfinished)},
        )


def check_limits(owner, command: MessageCommand, active_run_cap: int | None) -> None:
    if active_run_cap is not None:
        active = Run.objects.filter(owner=owner, state__in=COUNTED_RUN_STATES)[:active_run_cap].count()
        if active >= active_run_cap:
            raise limits.active_runs_refusal(active)
    if command.device_id is not None and not Device.objects.filter(id=command.device_id, owner=owner).exists():
        raise NotFound("No such device.")  # another user's device looks exactly like a missing one


def _admit_attempt(owner, replaced: Submission, command: MessageCommand, fingerprint: str) -> Submission:
    """The new attempt: the conversation's next message, a reply to the replaced reply's user message."""
    with connection.cursor() as cursor:
        cursor.execute(sequence_allocation("c.id = %s", events="0", messages="1"), [replaced.conversation_id])
        _, _, sequence = cursor.fetchone()
    earlier_attempts = attempt_ids_by_user_message([replaced.user_message_id])[replaced.user_message_id]
    return admit_reply(
        owner,
        replaced.user_message,
        sequence=sequence,
        command=command,
        fingerprint=fingerprint,
        # The user's words keep the moment they were written in, unless the client says where and when it is now.
        client_context=command.client_context or replaced.client_context,
        file_parts=file_parts_of(replaced.user_message_id),
        told={"replacesMessageId": str(replaced.assistant_message_id), "attempt": len(earlier_attempts) + 1},
    )


def admit_reply(
    owner,
    user_message: Message,
    *,
    sequence: int,
    command: MessageCommand,
    fingerprint: str,
    client_context: dict,
    file_parts: list[dict],
    told: dict,
) -> Submission:
    """A new reply to `user_message` (the conversation's message `sequence`, allocated by the caller), its submission
    and queued run, and its `submission.accepted` showing the files the message carries (`file_parts`) and what the
    command adds (`told`); the run is woken once committed. A regeneration's admission, and an edit's."""
    reply = Message.objects.create(
        conversation_id=user_message.conversation_id,
        sequence=sequence,
        role=MessageRole.ASSISTANT,
        status=MessageStatus.PENDING,
    )
    submission = Submission.objects.create(
        owner=owner,
        conversation_id=user_message.conversation_id,
        client_message_id=command.client_message_id,
        request_fingerprint=fingerprint,
        user_message=user_message,
        assistant_message=reply,
        device_id=command.device_id,
        client_context=client_context,
    )
    run = Run.objects.create(
        submission=submission, owner=owner, last_woken_at=timezone.now(), traceparent=telemetry.traceparent()
    )
    payload = accepted_payload(
        submission_id=submission.id,
        user_message=user_message,
        assistant_message=reply,
        status=run.state,
        file_parts=file_parts,
    )
    append_events(user_message.conversation_id, submission.id, [(EventType.SUBMISSION_ACCEPTED, payload | told)])
    outbound.wake_run(run.id)
    return submission
