"""Staff's actions on runs: decisions on runs parked for reconciliation, and audited cancels and retries.

One transaction per run: a run's lock is taken before its conversation's (`runtime.locks`), so locking several
runs in one transaction could deadlock against their workers.
"""

import uuid

from django.db import transaction
from django.utils import timezone

from runtime import locks, outbound
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
from runtime.services import lifecycle
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
        lifecycle.fail_parked_run(run, code="failed_by_staff", message=reason)
        return True


# --- audited actions ---------------------------------------------------------------------------------


def lock_run_for_staff(run_id) -> Run:
    run = locks.lock_run(id=run_id, related=("submission__user_message", "submission__assistant_message"))
    if run is None:
        raise Run.DoesNotExist(f"run {run_id}")
    return run


def staff_cancel_run(run_id, *, actor, batch: uuid.UUID) -> str:
    """Staff's cancel, the owner's own path (`request_cancel`) without the owner check; audited."""
    with transaction.atomic(durable=True):
        run = lock_run_for_staff(run_id)
        outcome = lifecycle.cancel(run)
        _audit(run, actor=actor, batch=batch, kind=StaffRunActionKind.CANCEL, outcome=outcome)
        return outcome


def reopen_failed_run(run: Run, *, actor, batch: uuid.UUID) -> str:
    """Staff's retry of a locked run, inside the caller's transaction: the same submission, a new attempt.

    What the failure left is cleared: the error, the counters that bounded the last series of attempts, the
    input-sent mark (the new attempt sends its input again, under a key of its own: `Run.retries`) and the
    reply's text. The acceptance is projected again, so clients show the reply as live once more.
    """
    if run.state != RunState.FAILED:
        return _audit(
            run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.NOT_FAILED
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
        text="", status=MessageStatus.PENDING, updated_at=now
    )
    payload = accepted_payload(
        submission_id=submission.id,
        user_message=submission.user_message,
        assistant_message=submission.assistant_message,
        status=run.state,
    )
    lifecycle.project_events(run, [(EventType.SUBMISSION_ACCEPTED, {**payload, "retry": run.retries})])
    outbound.wake_run(run.id)
    return _audit(
        run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.QUEUED_AGAIN
    )


def _audit(run: Run, *, actor, batch: uuid.UUID, kind: str, outcome: str) -> str:
    StaffRunAction.objects.create(run=run, actor=actor, batch=batch, kind=kind, outcome=outcome)
    return outcome
