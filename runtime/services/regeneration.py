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

from impo.core import telemetry
from impo.core.error_codes import ErrorCode
from impo.core.errors import Conflict, NotFound
from runtime import limits, locks, outbound
from runtime.attempts import attempt_ids_by_user_message
from runtime.events import append_events, sequence_allocation
from runtime.models import (
    COUNTED_RUN_STATES,
    TERMINAL_RUN_STATES,
    UNFINISHED_RUN_STATES,
    ConversationKind,
    EventType,
    Message,
    MessageRole,
    MessageStatus,
    Run,
    Submission,
)
from runtime.services.admission import MessageCommand, accepted_payload
from runtime.services.commands import Receipt, admit_once, replayed_receipt
from tools.models import Device


def regenerate_reply(
    *, owner, message_id: uuid.UUID, command: MessageCommand, active_run_cap: int | None = None
) -> Receipt:
    """Admits a new attempt at the reply `message_id` of the owner's (another user's reply is not found).

    `command` carries the client id and, optionally, the device and client context of the new attempt (its text is
    empty: the user message is the replaced reply's).
    """
    fingerprint = command.fingerprint(f"regenerate:{message_id}")

    def admit() -> Receipt:
        return _regenerate(owner, message_id, command, fingerprint, active_run_cap)

    return admit_once(owner, command.client_message_id, fingerprint, admit)


def _regenerate(owner, message_id, command: MessageCommand, fingerprint: str, active_run_cap: int | None) -> Receipt:
    replaced = (
        Submission.objects.filter(assistant_message_id=message_id, owner=owner, conversation__deleted_at__isnull=True)
        .select_related("run", "user_message", "assistant_message", "conversation__task")
        .first()
    )
    if replaced is None:
        raise NotFound("No such reply.")
    conversation = replaced.conversation
    # From here until commit no run of the conversation starts or ends, and no message is added.
    locks.lock_conversation(conversation.id)
    conversation.refresh_from_db(fields=["last_message_sequence", "deleted_at"])
    if conversation.deleted_at is not None:  # deleted since it was read: its deletion holds the lock first
        raise NotFound("No such reply.")
    replay = replayed_receipt(owner, command.client_message_id, fingerprint)
    if replay is not None:
        return replay
    unfinished = (
        Run.objects.filter(submission__conversation_id=conversation.id, state__in=UNFINISHED_RUN_STATES)
        .values_list("submission_id", flat=True)
        .first()
    )
    if unfinished is not None:
        raise Conflict(
            "A reply is still running in this conversation; regenerate once it has finished.",
            code=ErrorCode.RUN_IN_PROGRESS,
            details={"activeSubmissionId": str(unfinished)},
        )
    replaced.run.refresh_from_db(fields=["state"])
    if replaced.assistant_message.sequence != conversation.last_message_sequence or replaced.run.state not in (
        TERMINAL_RUN_STATES
    ):
        raise Conflict(
            "Only the last reply of a conversation, once it has ended, can be regenerated.",
            code=ErrorCode.NOT_REGENERABLE,
        )
    _check_limits(owner, command, active_run_cap)
    submission, run = _admit_attempt(owner, replaced, command, fingerprint)
    return Receipt(
        submission_id=submission.id,
        user_message_id=submission.user_message_id,
        conversation_id=conversation.id,
        task_id=conversation.task.id if conversation.kind == ConversationKind.TASK else None,
    )


def _check_limits(owner, command: MessageCommand, active_run_cap: int | None) -> None:
    if active_run_cap is not None:
        active = Run.objects.filter(owner=owner, state__in=COUNTED_RUN_STATES)[:active_run_cap].count()
        if active >= active_run_cap:
            raise limits.active_runs_refusal(active)
    if command.device_id is not None and not Device.objects.filter(id=command.device_id, owner=owner).exists():
        raise NotFound("No such device.")  # another user's device looks exactly like a missing one


def _admit_attempt(owner, replaced: Submission, command: MessageCommand, fingerprint: str) -> tuple[Submission, Run]:
    """The new attempt's reply (the conversation's next message), submission, queued run and `submission.accepted`."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(sequence_allocation("c.id = %s", events="0", messages="1"), [replaced.conversation_id])
        _, _, sequence = cursor.fetchone()
    reply = Message.objects.create(
        conversation_id=replaced.conversation_id,
        sequence=sequence,
        role=MessageRole.ASSISTANT,
        status=MessageStatus.PENDING,
    )
    submission = Submission.objects.create(
        owner=owner,
        conversation_id=replaced.conversation_id,
        client_message_id=command.client_message_id,
        request_fingerprint=fingerprint,
        user_message=replaced.user_message,
        assistant_message=reply,
        device_id=command.device_id,
        # The user's words keep the moment they were written in, unless the client says where and when it is now.
        client_context=command.client_context or replaced.client_context,
    )
    run = Run.objects.create(submission=submission, owner=owner, last_woken_at=now, traceparent=telemetry.traceparent())
    attempt_ids = attempt_ids_by_user_message([replaced.user_message_id])[replaced.user_message_id]
    payload = accepted_payload(
        submission_id=submission.id, user_message=replaced.user_message, assistant_message=reply, status=run.state
    )
    payload["replacesMessageId"] = str(replaced.assistant_message_id)
    payload["attempt"] = len(attempt_ids)
    append_events(replaced.conversation_id, submission.id, [(EventType.SUBMISSION_ACCEPTED, payload)])
    outbound.wake_run(run.id)
    return submission, run
