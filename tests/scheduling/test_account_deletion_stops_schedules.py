"""An account's deletion stops its schedules' Temporal workflows before the user (and its plans) go."""

from django.contrib.auth import get_user_model
from temporalio.client import WorkflowExecutionStatus

from devtools.stack import wait_until
from scheduling.models import Plan
from tests.factories import PASSWORD
from tests.scheduling.plans import create, daily
from tests.scheduling.test_plans_on_temporal import timer_is_pending, workflow_status


def test_deleting_the_account_stops_every_schedule_then_deletes_the_user(workers, api, user, temporal):
    plans = [create(api, schedule=daily("09:00"), title=title) for title in ("Digest", "Plants")]
    saved = [Plan.objects.get(id=plan["id"]) for plan in plans]
    for plan in saved:
        wait_until(lambda plan=plan: timer_is_pending(temporal.address, plan), timeout=30, what="the plan's timer")

    assert api.delete("/api/v1/account", {"password": PASSWORD}, format="json").status_code == 202

    wait_until(
        lambda: not get_user_model().objects.filter(pk=user.pk).exists(), timeout=90, what="the user to be deleted"
    )
    for plan in saved:  # each acknowledged its deletion before the user went; it ends as it returns
        wait_until(
            lambda plan=plan: workflow_status(temporal.address, plan) == WorkflowExecutionStatus.COMPLETED,
            timeout=10,
            what="the workflow to end",
        )
    assert not Plan.objects.filter(owner_id=user.pk).exists()
