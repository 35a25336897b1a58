"""Every run that fails or is parked for reconciliation leaves one WARNING line with its id and error code (never
its message), written once its transaction has committed."""

import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from core.error_codes import ErrorCode, RunError
from runtime import locks
from runtime.models import Run, RunState
from runtime.services import lifecycle, staff

# Committed for real: the lines are written on commit, and staff's failing is a durable transaction of its own.
pytestmark = pytest.mark.django_db(transaction=True)


def a_running_run(api) -> Run:
    body = {"clientMessageId": "m-1", "text": "hello"}
    receipt = api.post("/api/v1/conversation/messages", body, format="json").json()
    Run.objects.filter(submission_id=receipt["submissionId"]).update(
        state=RunState.RUNNING, lease_owner="worker-1", lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    return Run.objects.get(submission_id=receipt["submissionId"])


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "runtime.services.lifecycle" and r.levelno == 30]


def test_a_parked_run_then_failed_by_staff_leaves_one_line_each(api, caplog):
    run = a_running_run(api)
    caplog.set_level(logging.WARNING)

    with transaction.atomic():
        locked = locks.lock_run(id=run.id)
        lifecycle.await_reconciliation(locked, reason="the provider answered neither yes nor no")
        locked.save()
    staff.staff_fail_run(run.id, reason="Checked: it never reached the provider. secret-detail")

    assert warnings_of(caplog) == [
        f"run {run.id} parked for reconciliation: pending_reconciliation",
        f"run {run.id} failed: failed_by_staff",
    ]
    assert "secret-detail" not in caplog.text and "neither yes nor no" not in caplog.text


def test_a_failure_rolled_back_leaves_no_line(api, caplog):
    run = a_running_run(api)
    caplog.set_level(logging.WARNING)

    with pytest.raises(RuntimeError), transaction.atomic():
        locked = locks.lock_run(id=run.id)
        lifecycle.fail_parked_run(locked, RunError(ErrorCode.PROVIDER_REJECTED, "no"))
        raise RuntimeError("the transaction does not hold")

    assert warnings_of(caplog) == []
