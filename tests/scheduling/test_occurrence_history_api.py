"""A plan's occurrences through the scheduled-tasks REST API (`…/runs`, docs/design.md §7): pages newest first,
the admitted task's current status, its cursor."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from runtime.models import Submission, Task
from runtime.services import commands
from scheduling import services
from scheduling.models import Occurrence, OccurrenceState, Plan
from tests.factories import OccurrenceFactory
from tests.scheduling.plans import (
    create,
    error_of,
    plan_url,
)

pytestmark = pytest.mark.django_db


def _record_occurrences(plan_id, count: int) -> list[Occurrence]:
    plan = Plan.objects.get(id=plan_id)
    start = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    return [
        OccurrenceFactory(
            plan=plan,
            scheduled_at=start + timedelta(days=day),
            state=OccurrenceState.SKIPPED_OVERLAP,
        )
        for day in range(count)
    ]


def test_the_run_history_pages_newest_first_thirty_at_a_time(api):
    plan = create(api)
    recorded = _record_occurrences(plan["id"], 31)

    first = api.get(f"{plan_url(plan['id'])}/runs").json()
    second = api.get(f"{plan_url(plan['id'])}/runs", {"before": first["nextCursor"]}).json()

    assert [run["id"] for run in first["runs"]] == [str(run.id) for run in reversed(recorded[1:])]
    assert [run["id"] for run in second["runs"]] == [str(recorded[0].id)]
    assert second["nextCursor"] is None
    assert first["runs"][0] == {
        "id": str(recorded[30].id),
        "taskId": None,
        "scheduledAt": "2026-01-31T09:00:00+00:00",
        "createdAt": recorded[30].created_at.isoformat(),
        "status": "skipped_overlap",
    }


def test_the_run_history_shows_the_admitted_tasks_current_status(api):
    plan = create(api)
    services.admit_occurrence(
        plan_id=uuid.UUID(plan["id"]), revision=uuid.UUID(plan["revision"]), fire_time=timezone.now()
    )
    task = Task.objects.select_related("conversation").get()
    submission = Submission.objects.get(conversation=task.conversation)
    commands.request_cancel(owner=task.owner, submission_id=submission.id)

    [run] = api.get(f"{plan_url(plan['id'])}/runs").json()["runs"]

    assert run["taskId"] == str(task.id)
    assert run["status"] == "cancelled"


def test_a_run_history_of_exactly_one_page_has_no_next_cursor(api):
    plan = create(api)
    _record_occurrences(plan["id"], 30)

    assert api.get(f"{plan_url(plan['id'])}/runs").json()["nextCursor"] is None


def test_a_run_history_cursor_this_endpoint_never_returned_is_an_invalid_cursor(api):
    plan = create(api)

    assert error_of(api.get(f"{plan_url(plan['id'])}/runs", {"before": "not-a-cursor!"})) == (400, "invalid_cursor")


def test_an_unknown_run_history_parameter_is_an_invalid_request(api):
    plan = create(api)

    assert error_of(api.get(f"{plan_url(plan['id'])}/runs", {"after": "x"})) == (400, "invalid_request")
