"""Staff's actions on runs: decisions on runs parked for reconciliation, and audited cancels and retries.

One transaction per run: a run's lock is taken before its conversation's (`runtime.locks`), so locking several
runs in one transaction could deadlock against their workers.
"""

import uuid

from django.db import transaction
from django.utils import timezone

from attachments.selectors import file_parts_of
from core.error_codes import ErrorCode, RunError
from core.errors import Conflict, NotFound
from runtime import attempts, locks, outbound
from runtime.models import (
    EventType,
    Message,
    MessageStatus,
    Run,
    RunState,
    StaffRunAction,
    StaffRunActionKind,
    StaffRunActionOutcome,
)
from runtime.services import lifecycle, projection
from runtime.services.admission import accepted_payload


def staff_retry_run(run_id) -> bool:
    """Puts a run parked for reconciliation back in the queue; False when it is not parked."""
    with transaction.atomic(durable=True):
        run = locks.lock_run(id=run_id, state=RunState.PENDING_RECONCILIATION)
        if run is None:
            return False
        lifecycle.resume_parked_run(run)
        return True


def staff_fail_run(run_id, *, reason: str) -> bool:
    """Ends a parked run as failed, with the staff member's reason visible to its owner."""
    with transaction.atomic(durable=True):
        run = locks.lock_run(id=run_id, state=RunState.PENDING_RECONCILIATION)
        if run is None:
            return False
        # The owner may try again: support ended this attempt, not what was asked.
        lifecycle.fail_parked_run(run, RunError(ErrorCode.FAILED_BY_STAFF, reason))
        return True


# --- audited actions ---------------------------------------------------------------------------------


# What `reopen_failed_run` reads beside the run: both messages of its submission.
_RETRY_RELATED = ("submission__user_message", "submission__assistant_message")


def lock_run_for_staff(run_id) -> Run:
    run = locks.lock_run(id=run_id, related=_RETRY_RELATED)
    if run is None:
        raise Run.DoesNotExist(f"run {run_id}")
    return run


def reopen_owned_failed_run(*, owner, submission_id, retry_id: uuid.UUID) -> Run | None:
    """The owner's "Try again", inside the caller's transaction: `reopen_failed_run` on a run of their own (another
    user's is not found), audited as staff's retries are, with the owner as actor and `retry_id` (the clientRetryId)
    as batch.

    That row is what makes the same request again a replay (None: nothing is queued twice). A run that has not
    failed is refused with 409 `not_retryable`; the caller's transaction then rolls its audit row back.
    """
    run = locks.lock_run_for_owner(owner, submission_id=submission_id, related=_RETRY_RELATED)
    if run is None:
        raise NotFound("No such submission.")
    retries = StaffRunAction.objects.filter(run=run, batch=retry_id, kind=StaffRunActionKind.RETRY)
    if retries.filter(outcome=StaffRunActionOutcome.QUEUED_AGAIN).exists():
        return None
    outcome = reopen_failed_run(run, actor=owner, batch=retry_id)
    if outcome == StaffRunActionOutcome.REPLACED:
        raise Conflict(
            "This reply was regenerated, or its message edited; only the latest version can be tried again.",
            code=ErrorCode.NOT_RETRYABLE,
        )
    if outcome != StaffRunActionOutcome.QUEUED_AGAIN:
        raise Conflict("Only a failed reply can be tried again.", code=ErrorCode.NOT_RETRYABLE)
    return run


def staff_cancel_run(run_id, *, actor, batch: uuid.UUID) -> str:
    """Staff's cancel, the owner's own path (`request_cancel`) without the owner check; audited."""
    with transaction.atomic(durable=True):
        run = lock_run_for_staff(run_id)
        outcome = lifecycle.cancel(run, by_owner=False)
        _audit(run, actor=actor, batch=batch, kind=StaffRunActionKind.CANCEL, outcome=outcome)
        return outcome


def reopen_failed_run(run: Run, *, actor, batch: uuid.UUID) -> str:
    """Staff's (or the owner's) retry of a locked run, inside the caller's transaction: the same submission, a new
    attempt, audited with `actor` (staff, or the owner) and `batch` (the admin action, or the owner's clientRetryId).

    What the failure left is cleared: the error, the counters that bounded the last series of attempts, the
    input-sent mark (the new attempt sends its input again, under a key of its own: `Run.retries`) and the
    reply's text. The acceptance is projected again, so clients show the reply as live once more.
    """
    if run.state != RunState.FAILED:
        return _audit(
            run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.NOT_FAILED
        )
    if attempts.is_replaced(run.submission):
        # Its regeneration (or edit) went on in a session of its own, now the conversation's: this one is history.
        return _audit(
            run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.REPLACED
        )
    now = timezone.now()
    run.reopen_for_retry()
    run.error_code, run.error_message, run.error_retryable = "", "", False
    run.attempts = run.provider_failures = 0
    run.not_before = run.cancel_requested_at = run.input_sent_at = run.started_at = run.finished_at = None
    run.last_woken_at = now
    run.save()
    submission = run.submission
    Message.objects.filter(id=submission.assistant_message_id).update(
        text="", reasoning="", reasoning_seconds=None, status=MessageStatus.PENDING, updated_at=now
    )
    payload = accepted_payload(
        submission_id=submission.id,
        user_message=submission.user_message,
        assistant_message=submission.assistant_message,
        status=run.state,
        file_parts=file_parts_of(submission.user_message_id),
    )
    projection.project_events(run, [(EventType.SUBMISSION_ACCEPTED, {**payload, "retry": run.retries})])
    outbound.wake_run(run.id)
    return _audit(
        run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.QUEUED_AGAIN
    )


def _audit(run: Run, *, actor, batch: uuid.UUID, kind: str, outcome: str) -> str:
    StaffRunAction.objects.create(run=run, actor=actor, batch=batch, kind=kind, outcome=outcome)
    return outcome
