"""Plans timed by a real Temporal dev server and `manage.py temporal_worker` (docs/design.md §7)."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from devtools.stack import free_port, wait_until
from runtime.models import RunState, Submission, Task
from scheduling.models import Occurrence, OccurrenceState, Plan
from scheduling.services import PlanCommand, create_plan
from scheduling.workflows import workflow_id
from tests.scheduling.plans import create, cron, once, plan_url, seconds_from_now, update

pytestmark = pytest.mark.django_db(transaction=True)

FIRE_TIMEOUT = 30
# How far ahead a test's occurrence is: beyond the time a loaded machine takes to answer the plan's create (a
# run time already past is refused).
SOON = 4


def _workflow(address: str, plan: Plan, inspect):
    async def run():
        client = await Client.connect(address)
        handle = client.get_workflow_handle(workflow_id(plan.owner_id, str(plan.id)))
        try:
            return await inspect(handle)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    return asyncio.run(run())


def timer_is_pending(address: str, plan: Plan) -> bool:
    """Whether the workflow has started a timer (read from the server's history, not by querying the worker)."""

    async def timer_started(handle) -> bool:
        history = await handle.fetch_history()
        return any(event.event_type == EventType.EVENT_TYPE_TIMER_STARTED for event in history.events)

    return bool(_workflow(address, plan, timer_started))


def workflow_status(address: str, plan: Plan):
    async def status(handle):
        return (await handle.describe()).status

    return _workflow(address, plan, status)


def occurrences(plan_id) -> list[Occurrence]:
    return list(Occurrence.objects.filter(plan_id=plan_id).order_by("scheduled_at"))


def wait_for_occurrences(plan_id, count: int) -> list[Occurrence]:
    return wait_until(
        lambda: (found := occurrences(plan_id)) and len(found) >= count and found,
        timeout=FIRE_TIMEOUT,
        what=f"{count} occurrence(s) of plan {plan_id}",
    )


def test_a_fired_occurrence_becomes_an_ordinary_queued_task(api, user, temporal):
    run_at = seconds_from_now(SOON)
    plan = create(api, schedule=once(run_at), title="Water the plants", goal="Remind me to water the plants.")

    [occurrence] = wait_for_occurrences(plan["id"], 1)

    assert occurrence.state == OccurrenceState.ADMITTED
    assert occurrence.scheduled_at == run_at
    task = Task.objects.get(id=occurrence.task_id)
    assert (task.owner, task.title) == (user, "Water the plants")
    submission = Submission.objects.select_related("run", "user_message").get(conversation=task.conversation)
    assert submission.user_message.text == "Remind me to water the plants."
    assert submission.run.state == RunState.QUEUED
    assert [listed["taskId"] for listed in api.get("/api/v1/tasks").json()["tasks"]] == [str(task.id)]
    assert api.get(plan_url(plan["id"])).json()["nextRunAt"] is None


def test_editing_while_a_timer_is_pending_fences_the_old_timer(api, temporal):
    plan = create(api, schedule=once(seconds_from_now(SOON + 1)))
    saved = Plan.objects.get(id=plan["id"])
    wait_until(lambda: timer_is_pending(temporal.address, saved), timeout=10, what="the pending timer")

    new_run_at = seconds_from_now(SOON + 3)
    edited = update(api, plan, schedule=once(new_run_at))

    [occurrence] = wait_for_occurrences(plan["id"], 1)
    assert occurrence.scheduled_at == new_run_at
    assert str(occurrence.revision) == edited["revision"]


def test_an_occurrence_while_the_previous_task_is_active_is_skipped_without_a_task(api, user, temporal):
    plan = create(api, schedule=once(seconds_from_now(SOON)))
    [first] = wait_for_occurrences(plan["id"], 1)

    update(api, api.get(plan_url(plan["id"])).json(), schedule=once(seconds_from_now(SOON)))

    first, second = wait_for_occurrences(plan["id"], 2)
    assert (first.state, second.state) == (OccurrenceState.ADMITTED, OccurrenceState.SKIPPED_OVERLAP)
    assert second.task_id is None
    assert Task.objects.filter(owner=user).count() == 1
    runs = api.get(f"{plan_url(plan['id'])}/runs").json()["runs"]
    assert [(run["status"], run["taskId"]) for run in runs] == [
        ("skipped_overlap", None),
        ("queued", str(first.task_id)),  # the admitted Task's current status
    ]


def test_deleting_a_plan_ends_its_workflow_and_leaves_the_admitted_task_running(api, temporal):
    plan = create(api, schedule=once(seconds_from_now(SOON)))
    [occurrence] = wait_for_occurrences(plan["id"], 1)
    saved = Plan.objects.get(id=plan["id"])

    response = api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert response.json() == {"deleted": True}
    wait_until(
        lambda: workflow_status(temporal.address, saved) == WorkflowExecutionStatus.COMPLETED,
        timeout=10,
        what="the workflow to end",
    )
    run = Submission.objects.get(conversation__task__id=occurrence.task_id).run
    assert run.state == RunState.QUEUED
    assert run.cancel_requested_at is None


def test_deleting_a_plan_with_a_pending_timer_admits_nothing(api, temporal):
    run_at = seconds_from_now(SOON + 1)
    plan = create(api, schedule=once(run_at))
    saved = Plan.objects.get(id=plan["id"])
    wait_until(lambda: timer_is_pending(temporal.address, saved), timeout=10, what="the pending timer")

    api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    wait_until(
        lambda: workflow_status(temporal.address, saved) == WorkflowExecutionStatus.COMPLETED,
        timeout=10,
        what="the workflow to end",
    )
    # The workflow ended, timer and all, so nothing is left that could fire.
    assert datetime.now(UTC) < run_at
    assert occurrences(plan["id"]) == []


def test_a_plan_saved_while_temporal_is_unreachable_is_scheduled_by_discovery(api, temporal, settings):
    settings.TEMPORAL_ADDRESS = f"127.0.0.1:{free_port()}"
    settings.IMPO_SCHEDULE_SIGNAL_TIMEOUT_SECONDS = 1

    plan = create(api, schedule=once(seconds_from_now(SOON)))

    assert Plan.objects.get(id=plan["id"]).synced_generation == 0
    [occurrence] = wait_for_occurrences(plan["id"], 1)
    assert occurrence.state == OccurrenceState.ADMITTED
    assert Plan.objects.get(id=plan["id"]).synced_generation == 1


def test_a_missed_window_catches_up_once(user, temporal):
    ten_minutes_ago = datetime.now(UTC) - timedelta(minutes=10)
    plan = create_plan(
        owner=user,
        client_request_id=str(uuid.uuid4()),
        command=PlanCommand(title="Every minute", goal="Check the queue.", schedule=cron("* * * * *"), enabled=True),
        now=ten_minutes_ago,
    )

    [first, *later] = wait_for_occurrences(plan.id, 1)

    # Nine or ten fire times were missed; only the latest is admitted, and nothing before it.
    assert first.state == OccurrenceState.ADMITTED
    assert first.scheduled_at > datetime.now(UTC) - timedelta(minutes=2)
    assert all(run.state == OccurrenceState.SKIPPED_OVERLAP for run in later)
