"""Retries of a failed run, by staff or by its owner: the same submission queued again as a new attempt.

Runtime queues the run again and the binding to the provider's failed turn is dropped in the same transaction, so
the new attempt opens a turn of its own (a new input key) instead of re-reading the one that failed.
"""

import uuid

from django.db import transaction

from rebyte import bindings
from runtime.models import StaffRunActionOutcome
from runtime.services import staff


def staff_retry_failed_run(run_id, *, actor, batch) -> str:
    """Staff's retry of a failed run; answers the audited outcome."""
    with transaction.atomic(durable=True):
        run = staff.lock_run_for_staff(run_id)
        outcome = staff.reopen_failed_run(run, actor=actor, batch=batch)
        if outcome == StaffRunActionOutcome.QUEUED_AGAIN:
            bindings.forget_remote_turn(run)
        return outcome


def owner_retry_failed_run(*, owner, submission_id, client_retry_id: uuid.UUID) -> None:
    """The owner's "Try again": staff's retry, of a failed run of their own (`staff.reopen_owned_failed_run`)."""
    with transaction.atomic(durable=True):
        run = staff.reopen_owned_failed_run(owner=owner, submission_id=submission_id, retry_id=client_retry_id)
        if run is not None:  # queued again now, not a replay
            bindings.forget_remote_turn(run)
