"""The sweeper's passes over runs: wake-ups that may have been lost, leases that expired, approvals whose deadline
passed. Celery is only a wake-up: these passes make the database the queue of record.

Each pass locks runs with SKIP LOCKED: a run a worker or an answer holds now is found by the next pass if it
still needs it.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from runtime import locks, outbound
from runtime.models import Run
from runtime.services import lifecycle, projection
from runtime.services.claims import lease_expired, queued_and_ready
from tools import approvals as tool_approvals
from tools import selectors as tool_selectors


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
        not_woken_lately = (
            Q(last_woken_at__isnull=True) | Q(last_woken_at__lt=stale_wake) | Q(last_woken_at__lt=F("not_before"))
        )
        queued = locks.lock_free_runs(
            queued_and_ready() & not_woken_lately, order_by="created_at", limit=SWEEP_BATCH, related=()
        )
        # An expired lease gets one prompt wake-up, then one per re-wake interval until claimed.
        not_woken_since_expiry = Q(last_woken_at__lt=F("lease_expires_at")) | Q(last_woken_at__lt=stale_wake)
        expired = locks.lock_free_runs(
            lease_expired() & (Q(last_woken_at__isnull=True) | not_woken_since_expiry),
            order_by="lease_expires_at",
            limit=SWEEP_BATCH,
            related=(),
        )
        run_ids = [run.id for run in queued + expired]
        Run.objects.filter(id__in=run_ids).update(last_woken_at=now)
        for run_id in run_ids:
            outbound.wake_run(run_id)
    return SweepReport(rewoken=len(queued), expired_leases=len(expired))


def expire_tool_approvals() -> int:
    """Denies approvals past their deadline (`approval_timeout`) and requeues their runs; returns how many.

    The sweeper's part, so a deadline holds with no client connected. Runs are locked first (skipping those
    an answer or a cancel holds: the next pass finds them if they still need it).
    """
    denied = 0
    with transaction.atomic(durable=True):
        runs = locks.lock_free_runs(
            Q(id__in=tool_selectors.runs_with_expired_approvals(timezone.now())), order_by="id", limit=SWEEP_BATCH
        )
        for run in runs:
            count, events = tool_approvals.deny_expired(run)
            projection.project_events(run, events)
            denied += count
            lifecycle.requeue_if_answered(run)
            run.save()
    return denied
