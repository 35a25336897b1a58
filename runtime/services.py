"""Write paths of the runtime. Each entry point is one durable transaction.

Lock order, everywhere: a Run row before its Conversation row. The conversation row is locked only
by `_allocate_sequences`, which every event and message insert goes through.
"""

import hashlib
import json
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from impo.errors import Conflict, NotFound
from runtime import outbound
from runtime.models import (
    LEASED_RUN_STATES,
    Conversation,
    ConversationKind,
    Event,
    EventType,
    Message,
    MessageRole,
    MessageStatus,
    Run,
    RunState,
    Submission,
    Task,
)
from runtime.projection import event_to_wire
from tools.selectors import device_for_owner

TASK_TITLE_MAX = 120


@dataclass(frozen=True)
class MessageCommand:
    """A client's message, as validated at the boundary."""

    client_message_id: str
    text: str
    device_id: uuid.UUID | None = None
    client_context: dict = field(default_factory=dict)

    def fingerprint(self, target: str, **extra) -> str:
        canonical = json.dumps(
            {
                "target": target,
                "text": self.text,
                "deviceId": str(self.device_id) if self.device_id else None,
                "clientContext": self.client_context,
                **extra,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Receipt:
    submission_id: uuid.UUID
    user_message_id: uuid.UUID
    conversation_id: uuid.UUID
    task_id: uuid.UUID | None


def ensure_main_conversation(owner) -> Conversation:
    conversation, _ = Conversation.objects.get_or_create(owner=owner, kind=ConversationKind.MAIN_CHAT)
    return conversation


def submit_main_chat_message(*, owner, command: MessageCommand) -> Receipt:
    fingerprint = command.fingerprint("main_chat")

    def admit() -> Receipt:
        conversation = ensure_main_conversation(owner)
        return _admit(owner=owner, conversation=conversation, command=command, fingerprint=fingerprint)

    return _admit_once(owner, command.client_message_id, fingerprint, admit)


def create_task(*, owner, command: MessageCommand, title: str | None = None) -> Receipt:
    return _admit_once(
        owner,
        command.client_message_id,
        command.fingerprint("new_task", title=title),
        lambda: open_task(owner=owner, command=command, title=title),
    )


def open_task(*, owner, command: MessageCommand, title: str | None = None) -> Receipt:
    """Creates a Task with its conversation and first queued run inside the caller's transaction.

    For callers that admit a task as part of a larger atomic change (a scheduled occurrence); the
    caller owns idempotency, e.g. through a unique occurrence row written in the same transaction.
    """
    task_title = title or default_task_title(command.text)
    conversation = Conversation.objects.create(owner=owner, kind=ConversationKind.TASK, title=task_title)
    Task.objects.create(owner=owner, conversation=conversation, title=task_title)
    return _admit(
        owner=owner,
        conversation=conversation,
        command=command,
        fingerprint=command.fingerprint("new_task", title=title),
    )


def submit_task_message(*, owner, task_id: uuid.UUID, command: MessageCommand) -> Receipt:
    fingerprint = command.fingerprint(f"task:{task_id}")

    def admit() -> Receipt:
        task = Task.objects.filter(id=task_id, owner=owner).select_related("conversation").first()
        if task is None:
            raise NotFound("No such task.")
        return _admit(owner=owner, conversation=task.conversation, command=command, fingerprint=fingerprint)

    return _admit_once(owner, command.client_message_id, fingerprint, admit)


def default_task_title(text: str) -> str:
    first_line = text.strip().splitlines()[0].strip()
    if len(first_line) <= TASK_TITLE_MAX:
        return first_line
    return first_line[: TASK_TITLE_MAX - 1].rstrip() + "…"


def _admit_once(owner, client_message_id: str, fingerprint: str, admit) -> Receipt:
    """Runs `admit` in one durable transaction unless this client id was already admitted.

    Two concurrent posts of one id both miss the first lookup; the unique constraint lets one
    commit and the other roll back whole, after which it finds and returns the winner's receipt.
    """
    replay = _replayed_receipt(owner, client_message_id, fingerprint)
    if replay is not None:
        return replay
    try:
        with transaction.atomic(durable=True):
            return admit()
    except IntegrityError:
        replay = _replayed_receipt(owner, client_message_id, fingerprint)
        if replay is None:
            raise
        return replay


def _replayed_receipt(owner, client_message_id: str, fingerprint: str) -> Receipt | None:
    submission = (
        Submission.objects.filter(owner=owner, client_message_id=client_message_id)
        .select_related("conversation__task")
        .first()
    )
    if submission is None:
        return None
    if submission.request_fingerprint != fingerprint:
        raise Conflict("This clientMessageId was already used for a different message.", code="idempotency_conflict")
    return _receipt(submission)


def _receipt(submission: Submission) -> Receipt:
    # Only a task conversation has a task; asking a Main Chat would cost a query that finds nothing.
    conversation = submission.conversation
    task = conversation.task if conversation.kind == ConversationKind.TASK else None
    return Receipt(
        submission_id=submission.id,
        user_message_id=submission.user_message_id,
        conversation_id=submission.conversation_id,
        task_id=task.id if task else None,
    )


def _admit(*, owner, conversation: Conversation, command: MessageCommand, fingerprint: str) -> Receipt:
    if command.device_id is not None:
        # Another user's device looks exactly like a missing one.
        device_for_owner(owner, command.device_id)
    _, first_message_sequence = _allocate_sequences(conversation.id, events=0, messages=2)
    user_message = Message.objects.create(
        conversation=conversation,
        sequence=first_message_sequence,
        role=MessageRole.USER,
        text=command.text,
        status=MessageStatus.COMPLETED,
    )
    assistant_message = Message.objects.create(
        conversation=conversation,
        sequence=first_message_sequence + 1,
        role=MessageRole.ASSISTANT,
        status=MessageStatus.PENDING,
    )
    submission = Submission.objects.create(
        owner=owner,
        conversation=conversation,
        client_message_id=command.client_message_id,
        request_fingerprint=fingerprint,
        user_message=user_message,
        assistant_message=assistant_message,
        device_id=command.device_id,
        client_context=command.client_context,
    )
    run = Run.objects.create(submission=submission, last_woken_at=timezone.now())
    append_events(
        conversation.id,
        submission.id,
        [
            (
                EventType.SUBMISSION_ACCEPTED,
                {
                    "submissionId": str(submission.id),
                    "userMessage": {
                        "id": str(user_message.id),
                        "sequence": user_message.sequence,
                        "text": user_message.text,
                    },
                    "assistantMessage": {"id": str(assistant_message.id), "sequence": assistant_message.sequence},
                    "status": run.state,
                },
            )
        ],
    )
    outbound.wake_run(run.id)
    return _receipt(submission)


def append_events(conversation_id, submission_id, items: list[tuple[str, dict]]) -> list[Event]:
    """Persists events with the conversation's next `seq` values; pushes them after commit."""
    if not items:
        return []
    first_seq, _ = _allocate_sequences(conversation_id, events=len(items), messages=0)
    events = Event.objects.bulk_create(
        Event(
            conversation_id=conversation_id,
            submission_id=submission_id,
            seq=first_seq + offset,
            type=event_type,
            payload=payload,
        )
        for offset, (event_type, payload) in enumerate(items)
    )
    outbound.publish_events(conversation_id, [event_to_wire(event) for event in events])
    return events


def _allocate_sequences(conversation_id, *, events: int, messages: int) -> tuple[int, int]:
    """Reserves the next `events` event seqs and `messages` message sequences; returns the first of each.

    The row lock this UPDATE takes is held to commit, so concurrent writers to one conversation
    take turns and the sequences stay gapless.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runtime_conversation"
            " SET last_event_seq = last_event_seq + %s,"
            "     last_message_sequence = last_message_sequence + %s,"
            "     updated_at = now()"
            " WHERE id = %s RETURNING last_event_seq, last_message_sequence",
            [events, messages, conversation_id],
        )
        last_event_seq, last_message_sequence = cursor.fetchone()
    return last_event_seq - events + 1, last_message_sequence - messages + 1


# --- execution: claims, fenced writes, release -------------------------------------------------------


class LeaseLost(Exception):
    """This worker's lease was taken over (or the run finished elsewhere): it must stop writing."""


@dataclass(frozen=True)
class Lease:
    run_id: uuid.UUID
    generation: int
    worker_id: str
    attempt: int


def _lease_duration() -> timedelta:
    return timedelta(seconds=settings.IMPO_RUN_LEASE_SECONDS)


def claim_run(run_id, worker_id: str) -> Lease | None:
    """Takes the run under a fresh lease, or returns None when it is not this worker's to run."""
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update(skip_locked=True).select_related("submission").filter(id=run_id).first()
        if run is None or run.is_terminal:
            return None
        now = timezone.now()
        lease_is_live = run.lease_expires_at is not None and run.lease_expires_at > now
        if run.state not in (RunState.QUEUED, RunState.RUNNING) or (run.state == RunState.RUNNING and lease_is_live):
            return None
        if run.cancel_requested_at is not None and not run.remote_turn_id:
            _finish(run, RunState.CANCELLED, now=now)
            run.save()
            return None
        if run.attempts >= settings.IMPO_RUN_MAX_ATTEMPTS:
            _finish(
                run,
                RunState.FAILED,
                now=now,
                error=("max_attempts_exceeded", f"gave up after {run.attempts} attempts", False),
            )
            run.save()
            return None
        if run.state == RunState.QUEUED:
            run.transition_to(RunState.RUNNING)
        run.attempts += 1
        run.lease_generation += 1
        run.lease_owner = worker_id
        run.lease_expires_at = now + _lease_duration()
        run.started_at = run.started_at or now
        run.save()
        append_events(
            run.submission.conversation_id,
            run.submission_id,
            [
                (
                    EventType.RUN_STARTED,
                    {"submissionId": str(run.submission_id), "attempt": run.attempts, "status": run.state},
                )
            ],
        )
        return Lease(run_id=run.id, generation=run.lease_generation, worker_id=worker_id, attempt=run.attempts)


@contextmanager
def fenced(lease: Lease):
    """One durable transaction in which this worker may write, if and only if it still holds the lease.

    The conditional UPDATE both checks the fencing token and extends the lease, and its row lock
    keeps a would-be successor out until this transaction ends.
    """
    with transaction.atomic(durable=True):
        extended = Run.objects.filter(
            id=lease.run_id, lease_generation=lease.generation, state__in=LEASED_RUN_STATES
        ).update(lease_expires_at=timezone.now() + _lease_duration(), updated_at=timezone.now())
        if not extended:
            raise LeaseLost(f"run {lease.run_id}: generation {lease.generation} is no longer current")
        run = Run.objects.select_related("submission").get(id=lease.run_id)
        yield run
        run.save()


def heartbeat(lease: Lease) -> None:
    """Extends the lease; raises LeaseLost when it was taken over."""
    with fenced(lease):
        pass


def bind_turn_intent(lease: Lease, remote_session_id: int) -> None:
    """Records, before the remote create, which session the turn goes to and that it was requested."""
    with fenced(lease) as run:
        run.remote_session_id = remote_session_id
        run.turn_requested_at = timezone.now()


def bind_turn(lease: Lease, remote_turn_id: str, *, input_characters: int) -> None:
    from rebyte.services import record_session_activity  # rebyte's models point back at runtime's

    with fenced(lease) as run:
        run.remote_turn_id = remote_turn_id
        record_session_activity(
            run.remote_session_id,
            characters=input_characters,
            message_sequence=run.submission.user_message.sequence,
            now=timezone.now(),
            new_turn=True,
        )


def apply_text_delta(lease: Lease, *, cursor: int, part_id: str, delta: str) -> None:
    with fenced(lease) as run:
        run.provider_cursor = cursor
        message = Message.objects.select_for_update().get(id=run.submission.assistant_message_id)
        message.text += delta
        message.status = MessageStatus.STREAMING
        message.save()
        append_events(
            run.submission.conversation_id,
            run.submission_id,
            [(EventType.TEXT_DELTA, {"messageId": str(message.id), "partId": part_id, "delta": delta})],
        )


def apply_message_completed(lease: Lease, *, cursor: int, part_id: str, text: str) -> None:
    from rebyte.services import record_session_activity

    with fenced(lease) as run:
        run.provider_cursor = cursor
        message = Message.objects.get(id=run.submission.assistant_message_id)
        append_events(
            run.submission.conversation_id,
            run.submission_id,
            [(EventType.MESSAGE_COMPLETED, {"messageId": str(message.id), "partId": part_id, "text": text})],
        )
        if run.remote_session_id:
            record_session_activity(
                run.remote_session_id,
                characters=len(text),
                message_sequence=message.sequence,
                now=timezone.now(),
                new_turn=False,
            )


def advance_cursor(lease: Lease, *, cursor: int) -> None:
    """Skips a provider event that has no projection, so a resumed stream does not re-read it."""
    with fenced(lease) as run:
        run.provider_cursor = cursor


def finish_run(
    lease: Lease, state: str, *, cursor: int | None = None, error: tuple[str, str, bool] | None = None
) -> None:
    """Ends the run; `cursor` is the provider event that ended it, if one did."""
    with fenced(lease) as run:
        if cursor is not None:
            run.provider_cursor = cursor
        _finish(run, state, now=timezone.now(), error=error)


def release_run(lease: Lease, *, reason: str) -> None:
    """Gives the run back to the queue after a transient failure; the sweeper wakes it again later."""
    with fenced(lease) as run:
        run.transition_to(RunState.QUEUED)
        run.lease_owner = ""
        run.lease_expires_at = None
        run.error_message = reason
        run.last_woken_at = timezone.now()


def await_reconciliation(lease: Lease, *, intent_id=None, reason: str) -> None:
    """Parks the run until an ambiguous provider outcome is settled; visible as such meanwhile."""
    with fenced(lease) as run:
        run.transition_to(RunState.PENDING_RECONCILIATION)
        run.pending_intent_id = intent_id
        run.lease_owner = ""
        run.lease_expires_at = None
        run.error_code = "pending_reconciliation"
        run.error_message = reason
        run.error_retryable = True
        append_events(
            run.submission.conversation_id,
            run.submission_id,
            [(EventType.RUN_PENDING_RECONCILIATION, {"submissionId": str(run.submission_id), "reason": reason})],
        )


_FINAL_EVENT = {
    RunState.COMPLETED: EventType.RUN_COMPLETED,
    RunState.FAILED: EventType.RUN_FAILED,
    RunState.CANCELLED: EventType.RUN_CANCELLED,
}
_FINAL_MESSAGE_STATUS = {
    RunState.COMPLETED: MessageStatus.COMPLETED,
    RunState.FAILED: MessageStatus.FAILED,
    RunState.CANCELLED: MessageStatus.CANCELLED,
}


def _finish(run: Run, state: str, *, now, error: tuple[str, str, bool] | None = None) -> None:
    """Moves a locked run to a terminal state with its event; the caller saves the run."""
    run.transition_to(state)
    run.finished_at = now
    run.lease_owner = ""
    run.lease_expires_at = None
    run.error_code, run.error_message, run.error_retryable = error or ("", "", False)
    Message.objects.filter(id=run.submission.assistant_message_id).update(
        status=_FINAL_MESSAGE_STATUS[state], updated_at=now
    )
    payload = {
        "submissionId": str(run.submission_id),
        "status": state,
        "messageId": str(run.submission.assistant_message_id),
    }
    if error:
        payload["error"] = {"code": error[0], "message": error[1], "retryable": error[2]}
    append_events(run.submission.conversation_id, run.submission_id, [(_FINAL_EVENT[state], payload)])


def request_cancel(*, owner, submission_id) -> None:
    """Records the owner's cancellation; a run not yet at the provider is cancelled on the spot.

    Idempotent, and a finished run stays as it finished. For a run with a remote turn, the worker
    holding it relays the request to the provider (a successor does, if that worker died); the
    turn's stream then reports the outcome, which is `completed` if the turn finished first.
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update()
            .select_related("submission")
            .filter(submission_id=submission_id, submission__owner=owner)
            .first()
        )
        if run is None:
            raise NotFound("No such submission.")
        if run.is_terminal or run.cancel_requested_at is not None:
            return
        now = timezone.now()
        run.cancel_requested_at = now
        run.version += 1
        if not run.remote_turn_id and run.state in (RunState.QUEUED, RunState.PENDING_RECONCILIATION):
            _finish(run, RunState.CANCELLED, now=now)
        run.save()


# --- the sweeper ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepReport:
    rewoken: int
    expired_leases: int


SWEEP_BATCH = 200


def sweep_runs() -> SweepReport:
    """Re-wakes queued runs whose wake-up may have been lost and runs whose lease expired."""
    now = timezone.now()
    stale_wake = now - timedelta(seconds=settings.IMPO_REWAKE_AFTER_SECONDS)
    with transaction.atomic(durable=True):
        queued = list(
            Run.objects.select_for_update(skip_locked=True)
            .filter(state=RunState.QUEUED)
            .filter(Q(last_woken_at__isnull=True) | Q(last_woken_at__lt=stale_wake))
            .order_by("created_at")
            .values_list("id", flat=True)[:SWEEP_BATCH]
        )
        # An expired lease gets one prompt wake-up, then one per re-wake interval until claimed.
        not_woken_since_expiry = Q(last_woken_at__lt=F("lease_expires_at")) | Q(last_woken_at__lt=stale_wake)
        expired = list(
            Run.objects.select_for_update(skip_locked=True)
            .filter(state__in=LEASED_RUN_STATES, lease_expires_at__lt=now)
            .filter(Q(last_woken_at__isnull=True) | not_woken_since_expiry)
            .order_by("lease_expires_at")
            .values_list("id", flat=True)[:SWEEP_BATCH]
        )
        Run.objects.filter(id__in=queued + expired).update(last_woken_at=now)
        for run_id in queued + expired:
            outbound.wake_run(run_id)
    return SweepReport(rewoken=len(queued), expired_leases=len(expired))


def resume_reconciled_runs() -> int:
    """Re-queues runs whose awaited creation was settled, and fails those whose creation failed."""
    from rebyte.models import IntentState  # rebyte's models point back at runtime's

    resumed = 0
    with transaction.atomic(durable=True):
        waiting = (
            Run.objects.select_for_update(skip_locked=True)
            .select_related("submission", "pending_intent")
            .filter(
                state=RunState.PENDING_RECONCILIATION,
                pending_intent__state__in=[IntentState.CREATED, IntentState.FAILED],
            )
        )
        now = timezone.now()
        for run in waiting[:SWEEP_BATCH]:
            if run.pending_intent.state == IntentState.FAILED:
                _finish(
                    run, RunState.FAILED, now=now, error=("provider_rejected", run.pending_intent.last_error, False)
                )
            else:
                run.transition_to(RunState.QUEUED)
                run.error_code, run.error_message, run.error_retryable = "", "", False
                run.last_woken_at = now
                outbound.wake_run(run.id)
                resumed += 1
            run.pending_intent = None
            run.save()
    return resumed


# --- staff decisions on runs left pending reconciliation -----------------------------------------


def staff_retry_run(run_id) -> bool:
    """Puts a run parked for reconciliation back in the queue; False when it is not parked."""
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id, state=RunState.PENDING_RECONCILIATION).first()
        if run is None:
            return False
        run.transition_to(RunState.QUEUED)
        run.pending_intent = None
        run.error_code, run.error_message, run.error_retryable = "", "", False
        run.last_woken_at = timezone.now()
        run.save()
        outbound.wake_run(run.id)
        return True


def staff_fail_run(run_id, *, reason: str) -> bool:
    """Ends a parked run as failed, with the staff member's reason visible to its owner."""
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update()
            .select_related("submission")
            .filter(id=run_id, state=RunState.PENDING_RECONCILIATION)
            .first()
        )
        if run is None:
            return False
        _finish(run, RunState.FAILED, now=timezone.now(), error=("failed_by_staff", reason, False))
        run.pending_intent = None
        run.save()
        return True
