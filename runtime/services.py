"""Write paths of the runtime. Each entry point is one durable transaction.

Every Run state change lives here. Lock order, everywhere: a Run row before its Conversation row; the
conversation row is locked only by the event log's `allocate_sequences`, which every insert goes through.
"""

import hashlib
import json
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from impo.errors import Conflict, NotFound
from runtime import outbound
from runtime.events import allocate_sequences, append_events
from runtime.models import (
    ACTIVE_RUN_STATES,
    LEASED_RUN_STATES,
    Conversation,
    ConversationKind,
    EventType,
    Message,
    MessageRole,
    MessageStatus,
    Run,
    RunState,
    Submission,
    Task,
)
from tools import selectors as tool_selectors
from tools import services as tool_services
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
    _, first_message_sequence = allocate_sequences(conversation.id, events=0, messages=2)
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


def provider_backoff_seconds(failures: int) -> float:
    """0.5 s, doubling per consecutive provider failure, capped (DESIGN §1.4)."""
    return min(settings.IMPO_PROVIDER_BACKOFF_CAP_SECONDS, 0.5 * 2 ** max(0, failures - 1))


def _earlier_run_unfinished(run: Run) -> bool:
    """One writer per conversation: a run waits while any run admitted before it in its conversation is active."""
    return (
        Run.objects.filter(
            submission__conversation_id=run.submission.conversation_id,
            submission__user_message__sequence__lt=run.submission.user_message.sequence,
            state__in=ACTIVE_RUN_STATES,
        )
        .exclude(id=run.id)
        .exists()
    )


def claim_run(run_id, worker_id: str) -> Lease | None:
    """Takes the run under a fresh lease, or returns None when it is not this worker's to run now."""
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("submission__user_message")
            .filter(id=run_id)
            .first()
        )
        if run is None or run.is_terminal:
            return None
        now = timezone.now()
        if run.state == RunState.QUEUED and run.not_before is not None and run.not_before > now:
            return None  # backing off from a provider outage; its delayed wake-up (or the sweeper) comes back
        lease_is_live = run.lease_expires_at is not None and run.lease_expires_at > now
        if run.state not in (RunState.QUEUED, *LEASED_RUN_STATES) or (run.state in LEASED_RUN_STATES and lease_is_live):
            return None
        if _earlier_run_unfinished(run):
            return None  # the earlier run's end wakes this one
        if run.cancel_requested_at is not None and run.input_sent_at is None:
            _finish(run, RunState.CANCELLED, now=now)
            run.save()
            return None
        if run.attempts >= settings.IMPO_RUN_MAX_ATTEMPTS:
            cause = run.error_message or "no cause recorded"
            message = f"gave up after {run.attempts} attempts; last: {cause}"
            _finish(run, RunState.FAILED, now=now, error=("max_attempts_exceeded", message, False))
            run.save()
            return None
        if run.state != RunState.RUNNING:
            run.transition_to(RunState.RUNNING)
        run.attempts += 1
        run.lease_generation += 1
        run.lease_owner = worker_id
        run.lease_expires_at = now + _lease_duration()
        run.not_before = None
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


def mark_input_sent(run: Run) -> None:
    """Inside the fenced transaction committed before the run's input goes to the provider."""
    run.input_sent_at = run.input_sent_at or timezone.now()


def project_text_delta(run: Run, *, part_id: str, delta: str) -> None:
    """Appends to the assistant message and projects the delta; inside the run's fenced transaction."""
    message = Message.objects.select_for_update().get(id=run.submission.assistant_message_id)
    message.text += delta
    message.status = MessageStatus.STREAMING
    message.save(update_fields=["text", "status", "updated_at"])
    append_events(
        run.submission.conversation_id,
        run.submission_id,
        [(EventType.TEXT_DELTA, {"messageId": str(message.id), "partId": part_id, "delta": delta})],
    )


def project_message_completed(run: Run, *, part_id: str, text: str) -> None:
    append_events(
        run.submission.conversation_id,
        run.submission_id,
        [
            (
                EventType.MESSAGE_COMPLETED,
                {"messageId": str(run.submission.assistant_message_id), "partId": part_id, "text": text},
            )
        ],
    )


def enter_waiting_device(run: Run) -> None:
    if run.state == RunState.RUNNING:
        run.transition_to(RunState.WAITING_DEVICE)


def leave_waiting_device(run: Run) -> None:
    if run.state == RunState.WAITING_DEVICE:
        run.transition_to(RunState.RUNNING)


def await_approval(run: Run) -> None:
    """Parks the run (inside its fenced transaction) while one of its calls waits for its owner's answer.

    No worker holds it meanwhile: the lease goes, and so does the attempt, since waiting for a person is no
    crash. The answer, the deadline (the sweeper) or a cancel puts it back in the queue.
    """
    run.transition_to(RunState.WAITING_APPROVAL)
    run.attempts = max(0, run.attempts - 1)
    run.lease_owner = ""
    run.lease_expires_at = None


def _requeue_if_answered(run: Run) -> None:
    """A locked run parked for approval goes back to the queue once none of its calls awaits an answer."""
    if run.state != RunState.WAITING_APPROVAL or tool_selectors.has_pending_approval(run):
        return
    run.transition_to(RunState.QUEUED)
    run.last_woken_at = timezone.now()
    outbound.wake_run(run.id)


def answer_tool_approval(*, owner, tool_call_id, answer: tool_services.ApprovalAnswer):
    """The owner's approve / deny / edit of a call, and the run made claimable again, in one transaction.

    Returns the approval and whether this answer replayed the recorded one. The run is locked before its
    calls, as everywhere, so two devices answering at once take turns and one decision is recorded.
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("submission")
            .filter(tool_calls__id=tool_call_id, submission__owner=owner)
            .first()
        )
        if run is None:
            raise NotFound("No such tool call.")
        approval, replay = tool_services.answer_approval(run, tool_call_id, answer, decided_by=owner)
        if not replay:
            _requeue_if_answered(run)
            run.save()
        return approval, replay


def finish_run(lease: Lease, state: str, *, error: tuple[str, str, bool] | None = None) -> None:
    with fenced(lease) as run:
        finish_in_transaction(run, state, error=error)


def finish_in_transaction(run: Run, state: str, *, error: tuple[str, str, bool] | None = None) -> None:
    """Ends the run inside its fenced transaction (with whatever else that transaction records)."""
    _finish(run, state, now=timezone.now(), error=error)


def release_for_provider(lease: Lease, *, cause: str) -> float:
    """Gives the run back while the provider is unavailable; returns the backoff before it may be claimed.

    Not counted as an attempt: a provider outage of any length never fails a run whose remote turn may
    still be running. The cause stays on the run, for staff and for the final error if our own code fails.
    """
    with fenced(lease) as run:
        run.transition_to(RunState.QUEUED)
        run.attempts = max(0, run.attempts - 1)
        run.provider_failures += 1
        delay = provider_backoff_seconds(run.provider_failures)
        now = timezone.now()
        run.not_before = now + timedelta(seconds=delay)
        run.lease_owner = ""
        run.lease_expires_at = None
        run.error_message = cause
        run.last_woken_at = now
        outbound.wake_run(run.id, delay_seconds=delay)
        return delay


def note_provider_recovered(run: Run) -> None:
    run.provider_failures = 0


def release_after_error(lease: Lease, *, cause: str) -> None:
    """Gives the run back after an unexpected error of our own; the attempt counts, and the cause is kept."""
    with fenced(lease) as run:
        run.transition_to(RunState.QUEUED)
        run.lease_owner = ""
        run.lease_expires_at = None
        run.error_message = cause
        run.last_woken_at = timezone.now()
        outbound.wake_run(run.id)


def await_reconciliation(run: Run, *, reason: str) -> None:
    """Parks the run (inside its fenced transaction) until an ambiguous provider outcome is settled."""
    run.transition_to(RunState.PENDING_RECONCILIATION)
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


def resume_parked_run(run: Run) -> None:
    """A locked run parked for reconciliation goes back to the queue: what it waited for was settled."""
    run.transition_to(RunState.QUEUED)
    run.error_code, run.error_message, run.error_retryable = "", "", False
    run.last_woken_at = timezone.now()
    run.save()
    outbound.wake_run(run.id)


def fail_parked_run(run: Run, *, code: str, message: str) -> None:
    _finish(run, RunState.FAILED, now=timezone.now(), error=(code, message, False))
    run.save()


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
    """Moves a locked run to a terminal state with its event, and wakes its conversation's next run."""
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
    following = (
        Run.objects.filter(submission__conversation_id=run.submission.conversation_id, state=RunState.QUEUED)
        .exclude(id=run.id)
        .order_by("submission__user_message__sequence")
        .values_list("id", flat=True)
        .first()
    )
    if following is not None:
        outbound.wake_run(following)


def request_cancel(*, owner, submission_id) -> None:
    """Records the owner's cancellation; a run whose input never left is cancelled on the spot.

    Idempotent, and a finished run stays as it finished. Once the input was sent, the worker driving
    the run relays the cancel to the provider (a successor does, if that worker died), and the final
    state follows the turn's: `completed` if it finished first.
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(of=("self",))
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
        # In this transaction, under the run's lock taken first: no answer can approve one of them meanwhile.
        tool_services.deny_for_cancel(run)
        if run.input_sent_at is None and run.state in (RunState.QUEUED, RunState.PENDING_RECONCILIATION):
            _finish(run, RunState.CANCELLED, now=now)
        elif run.state == RunState.WAITING_APPROVAL:
            _requeue_if_answered(run)  # a worker relays the cancel to the turn still waiting on the call
        elif run.state == RunState.QUEUED:
            outbound.wake_run(run.id)  # a worker must relay it to the provider
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
            .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
            .filter(
                Q(last_woken_at__isnull=True) | Q(last_woken_at__lt=stale_wake) | Q(last_woken_at__lt=F("not_before"))
            )
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


def expire_tool_approvals() -> int:
    """Denies approvals past their deadline (`approval_timeout`) and requeues their runs; returns how many.

    The sweeper's part, so a deadline holds with no client connected. Runs are locked first (skipping those
    an answer or a cancel holds: the next pass finds them if they still need it).
    """
    denied = 0
    with transaction.atomic(durable=True):
        runs = (
            Run.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("submission")
            .filter(id__in=tool_selectors.runs_with_expired_approvals(timezone.now()))
            .order_by("id")[:SWEEP_BATCH]
        )
        for run in runs:
            denied += tool_services.deny_expired(run)
            _requeue_if_answered(run)
            run.save()
    return denied


# --- staff decisions on runs left pending reconciliation -----------------------------------------


def staff_retry_run(run_id) -> bool:
    """Puts a run parked for reconciliation back in the queue; False when it is not parked."""
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id, state=RunState.PENDING_RECONCILIATION).first()
        if run is None:
            return False
        resume_parked_run(run)
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
        fail_parked_run(run, code="failed_by_staff", message=reason)
        return True
