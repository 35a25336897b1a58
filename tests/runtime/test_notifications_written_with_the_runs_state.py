"""The notification outbox (docs/design.md §10): a run that reaches a state its owner must hear about gets its
notification row in the very transaction that records the state, at most one per run and kind, and none for what the
owner did."""

import uuid

import pytest
from django.db import transaction

from core.error_codes import ErrorCode, RunError
from runtime.models import Notification, NotificationKind, Run, RunState
from runtime.services import claims, commands, lifecycle
from runtime.services.lifecycle import notify_owner
from runtime.services.staff import staff_cancel_run, staff_fail_run
from tools import services as tool_services

pytestmark = pytest.mark.django_db(transaction=True)


def admitted_run(api, text: str = "hello") -> Run:
    receipt = api.post(
        "/api/v1/conversation/messages", {"clientMessageId": str(uuid.uuid4()), "text": text}, format="json"
    ).json()
    return Run.objects.get(submission_id=receipt["submissionId"])


def kinds_of(run: Run) -> list[str]:
    return sorted(Notification.objects.filter(run=run).values_list("kind", flat=True))


def test_a_finished_run_has_its_notification_committed_with_its_state(api):
    run = admitted_run(api)
    lease = claims.claim_run(run.id, "worker-a")

    claims.finish_run(lease, RunState.COMPLETED)

    assert kinds_of(run) == [NotificationKind.COMPLETED]
    notification = Notification.objects.get(run=run)
    assert notification.dispatched_at is None


def test_a_finish_that_rolls_back_leaves_no_notification(api):
    run = admitted_run(api)
    lease = claims.claim_run(run.id, "worker-a")

    with pytest.raises(RuntimeError), claims.fenced(lease) as locked:
        lifecycle.finish_in_transaction(locked, RunState.FAILED, error=RunError(ErrorCode.PROVIDER_ERROR, "it broke"))
        raise RuntimeError("the transaction fails after the state was set")

    assert Run.objects.get(id=run.id).state == RunState.RUNNING
    assert kinds_of(run) == []


def test_the_owners_own_cancel_is_not_notified_but_staffs_is(api, staff):
    owners = admitted_run(api, "first")
    commands.request_cancel(owner=owners.owner, submission_id=owners.submission_id)
    staffs = admitted_run(api, "second")

    staff_cancel_run(staffs.id, actor=staff, batch=uuid.uuid4())

    assert Run.objects.get(id=owners.id).state == RunState.CANCELLED
    assert kinds_of(owners) == []
    assert Run.objects.get(id=staffs.id).state == RunState.CANCELLED
    assert kinds_of(staffs) == [NotificationKind.CANCELLED]


def test_a_run_parked_for_reconciliation_then_failed_by_staff_is_notified_of_both(api):
    run = admitted_run(api)
    lease = claims.claim_run(run.id, "worker-a")
    with claims.fenced(lease) as locked:
        lifecycle.await_reconciliation(locked, reason="the provider's answer was lost")

    assert kinds_of(run) == [NotificationKind.RECONCILIATION]
    assert staff_fail_run(run.id, reason="checked: it never ran")
    assert kinds_of(run) == [NotificationKind.FAILED, NotificationKind.RECONCILIATION]


def test_a_run_waiting_for_approval_is_notified_once_however_often_it_waits(api, settings):
    settings.IMPO_TOOL_APPROVAL = {"save_note": "always"}
    run = admitted_run(api, '/tool save_note {"text": "buy milk"}')
    lease = claims.claim_run(run.id, "worker-a")
    with claims.fenced(lease) as locked:
        _, events = tool_services.record_call(locked, call_id="call_1", name="save_note", arguments={"text": "a"})
        locked.append(events)
        lifecycle.await_approval(locked)

    assert kinds_of(run) == [NotificationKind.APPROVAL]
    with transaction.atomic():  # a later wait of the same run (another call) writes no second row
        notify_owner(Run.objects.get(id=run.id), NotificationKind.APPROVAL)
    assert kinds_of(run) == [NotificationKind.APPROVAL]
