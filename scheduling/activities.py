"""The plan workflow's activities. They run on the worker's thread pool, so each opens its own connection."""

import uuid
from datetime import datetime

from django.db import close_old_connections
from temporalio import activity

from scheduling import services
from scheduling.schedules import Schedule, catch_up_fire_time, next_fire_after
from scheduling.workflows import ADMIT_ACTIVITY, PLAN_STEP_ACTIVITY, AdmitInput, PlanStep, PlanStepInput


@activity.defn(name=PLAN_STEP_ACTIVITY)
def plan_step(step: PlanStepInput) -> PlanStep:
    """Pure: which fire time is due in (handled_until, now] (at most one: catch up once), and which comes next."""
    schedule = Schedule.from_json(step.schedule)
    handled_until = datetime.fromisoformat(step.handled_until)
    now = datetime.fromisoformat(step.now)
    due = catch_up_fire_time(schedule, handled_until, now)
    next_fire = next_fire_after(schedule, max(handled_until, now))
    return PlanStep(
        due=None if due is None else due.isoformat(),
        next_fire=None if next_fire is None else next_fire.isoformat(),
    )


@activity.defn(name=ADMIT_ACTIVITY)
def admit_occurrence(admit: AdmitInput) -> str:
    # Thread-pool threads outlive requests, so nothing else closes their broken or expired connections.
    close_old_connections()
    try:
        return services.admit_occurrence(
            plan_id=uuid.UUID(admit.plan_id),
            revision=uuid.UUID(admit.revision),
            fire_time=datetime.fromisoformat(admit.fire_time),
        )
    finally:
        close_old_connections()
