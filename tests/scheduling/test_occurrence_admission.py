"""`admit_occurrence`: one transaction that fences stale timers, skips overlaps and admits a Task once."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from runtime.models import Run, RunState, Submission, Task
from scheduling import services
from scheduling.activities import plan_step
from scheduling.models import Occurrence, OccurrenceState
from scheduling.services import PlanCommand
from scheduling.workflows import AdmitOutcome, PlanStepInput
from tests.concurrency import all_at_once
from tests.factories import UserFactory
from tests.scheduling.plans import cron, daily

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
FIRE = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)


def make_plan(owner, *, schedule=None, enabled=True):
    return services.create_plan(
        owner=owner,
        client_request_id=str(uuid.uuid4()),
        command=PlanCommand(
            title="Morning digest", goal="Summarise my mail.", schedule=schedule or daily(), enabled=enabled
        ),
        now=NOW,
    )


def admit(plan, fire_time=FIRE, revision=None):
    return services.admit_occurrence(
        plan_id=plan.id, revision=revision or plan.revision, fire_time=fire_time, now=fire_time
    )


def latest_task_run(owner) -> Run:
    return Run.objects.filter(submission__owner=owner).order_by("-created_at").first()


@pytest.mark.django_db
def test_an_occurrence_opens_one_ordinary_task_with_a_queued_run(user):
    plan = make_plan(user)

    assert admit(plan) == AdmitOutcome.ADMITTED

    occurrence = Occurrence.objects.get(plan=plan)
    assert (occurrence.state, occurrence.scheduled_at, occurrence.revision) == ("admitted", FIRE, plan.revision)
    submission = Submission.objects.select_related("run", "user_message").get(conversation__task=occurrence.task)
    assert submission.user_message.text == "Summarise my mail."
    assert submission.client_message_id == services.occurrence_client_message_id(plan.id, FIRE)
    assert submission.run.state == RunState.QUEUED
    assert occurrence.task.title == "Morning digest"


@pytest.mark.django_db
def test_an_occurrences_message_carries_the_plans_zone_and_the_fire_time_as_its_client_context(user):
    plan = make_plan(user, schedule=daily("09:00", "Europe/Berlin"))

    admit(plan)

    submission = Submission.objects.get(conversation__task=Occurrence.objects.get(plan=plan).task)
    assert submission.client_context == {"timeZone": "Europe/Berlin", "currentDate": "2026-03-03T09:00:00+01:00"}


@pytest.mark.django_db
def test_an_occurrence_advances_the_next_run_time(user):
    plan = make_plan(user, schedule=daily("09:00", "Europe/Berlin"))

    admit(plan)

    plan.refresh_from_db()
    assert plan.next_run_at == datetime(2026, 3, 4, 8, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_repeating_an_admission_returns_the_first_outcome_without_a_second_task(user):
    plan = make_plan(user)
    admit(plan)

    assert admit(plan) == AdmitOutcome.ADMITTED

    assert Task.objects.filter(owner=user).count() == 1
    assert Occurrence.objects.filter(plan=plan).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_executions_of_one_admission_admit_once():
    owner = UserFactory()
    plan = make_plan(owner)
    outcomes = all_at_once(2, lambda _: admit(plan))

    assert outcomes == [AdmitOutcome.ADMITTED, AdmitOutcome.ADMITTED]
    assert Task.objects.filter(owner=owner).count() == 1


@pytest.mark.django_db
def test_a_timer_of_an_old_revision_is_fenced(user):
    plan = make_plan(user)
    old_revision = plan.revision
    plan = services.update_plan(
        owner=user,
        plan_id=plan.id,
        revision=old_revision,
        command=PlanCommand(title="Renamed", goal=plan.goal, schedule=plan.schedule, enabled=True),
        now=NOW,
    )

    assert admit(plan, revision=old_revision) == AdmitOutcome.STALE

    assert not Occurrence.objects.exists()
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_a_timer_of_a_deleted_plan_is_fenced(user):
    plan = make_plan(user)
    services.delete_plan(owner=user, plan_id=plan.id, revision=plan.revision, now=NOW)

    assert admit(plan) == AdmitOutcome.STALE

    assert not Task.objects.exists()


@pytest.mark.django_db
def test_a_timer_of_a_paused_plan_is_fenced(user):
    plan = make_plan(user, enabled=False)

    assert admit(plan) == AdmitOutcome.STALE

    assert not Task.objects.exists()


@pytest.mark.django_db
def test_an_occurrence_while_the_previous_task_is_queued_is_skipped_without_a_task(user):
    plan = make_plan(user)
    admit(plan)

    assert admit(plan, FIRE + timedelta(days=1)) == AdmitOutcome.SKIPPED_OVERLAP

    skipped = Occurrence.objects.get(plan=plan, scheduled_at=FIRE + timedelta(days=1))
    assert (skipped.state, skipped.task) == (OccurrenceState.SKIPPED_OVERLAP, None)
    assert Task.objects.filter(owner=user).count() == 1


@pytest.mark.parametrize("state", [RunState.RUNNING, RunState.WAITING_DEVICE, RunState.PENDING_RECONCILIATION])
@pytest.mark.django_db
def test_a_previous_task_still_at_work_counts_as_overlap(user, state):
    plan = make_plan(user)
    admit(plan)
    Run.objects.filter(id=latest_task_run(user).id).update(state=state, lease_expires_at=NOW)

    assert admit(plan, FIRE + timedelta(days=1)) == AdmitOutcome.SKIPPED_OVERLAP


@pytest.mark.parametrize("state", [RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED])
@pytest.mark.django_db
def test_an_occurrence_after_the_previous_task_finished_admits_a_new_task(user, state):
    plan = make_plan(user)
    admit(plan)
    Run.objects.filter(id=latest_task_run(user).id).update(state=state)

    assert admit(plan, FIRE + timedelta(days=1)) == AdmitOutcome.ADMITTED

    assert Task.objects.filter(owner=user).count() == 2


@pytest.mark.django_db
def test_a_newer_message_in_the_previous_task_keeps_it_active(user):
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_task_message

    plan = make_plan(user)
    admit(plan)
    first_run = latest_task_run(user)
    Run.objects.filter(id=first_run.id).update(state=RunState.COMPLETED)
    submit_task_message(
        owner=user,
        task_id=first_run.submission.conversation.task.id,
        command=MessageCommand(client_message_id=str(uuid.uuid4()), text="And the calendar too."),
    )

    assert admit(plan, FIRE + timedelta(days=1)) == AdmitOutcome.SKIPPED_OVERLAP


def test_a_step_after_a_long_outage_admits_only_the_latest_missed_fire_time():
    step = plan_step(
        PlanStepInput(
            schedule=daily("09:00", "UTC"),
            handled_until=datetime(2026, 3, 1, 10, 0, tzinfo=UTC).isoformat(),
            now=datetime(2026, 3, 5, 12, 0, tzinfo=UTC).isoformat(),
        )
    )

    assert step.due == datetime(2026, 3, 5, 9, 0, tzinfo=UTC).isoformat()
    assert step.next_fire == datetime(2026, 3, 6, 9, 0, tzinfo=UTC).isoformat()


def test_a_step_before_the_fire_time_only_names_the_next_one():
    step = plan_step(
        PlanStepInput(
            schedule=cron("30 * * * *"),
            handled_until=datetime(2026, 3, 1, 10, 0, tzinfo=UTC).isoformat(),
            now=datetime(2026, 3, 1, 10, 5, tzinfo=UTC).isoformat(),
        )
    )

    assert (step.due, step.next_fire) == (None, datetime(2026, 3, 1, 10, 30, tzinfo=UTC).isoformat())
