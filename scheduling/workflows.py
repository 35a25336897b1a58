"""The plan's Temporal workflow: a durable timer that asks the database to admit each occurrence.

Determinism: this module imports nothing but the standard library and temporalio, so the sandbox loads it
as is. The workflow reads time only through `workflow.now()` and sleeps only through `wait_condition` with a
timeout (a durable timer that a signal interrupts). Fire times are computed by the local activity
`plan_step`, not here: croniter and the tz database are then never imported into the sandbox, and a tzdata
upgrade on one worker cannot make a replay diverge from the history that recorded the old answer. Everything
touching the database happens in the activity `admit_occurrence`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

WORKFLOW_NAME = "TaskScheduleWorkflow"
REVISE_SIGNAL = "revise"
GENERATION_QUERY = "generation"
# Mirrors the generation the workflow holds, so discovery can compare it from a describe, without a worker.
GENERATION_MEMO = "generation"
PLAN_STEP_ACTIVITY = "plan_step"
ADMIT_ACTIVITY = "admit_occurrence"

# Each loop adds a handful of events; continuing as new well before Temporal's own suggestion keeps replays cheap.
DEFAULT_LOOPS_BEFORE_CONTINUE = 500


def workflow_id(owner_id: int, plan_id: str) -> str:
    return f"impo/task-schedule/{owner_id}/{plan_id}"


@dataclass(frozen=True)
class PlanSignal:
    """Everything the workflow knows about a plan, sent on create and on every change (and re-sent by discovery)."""

    plan_id: str
    owner_id: int
    generation: int
    revision: str
    schedule: dict
    enabled: bool
    deleted: bool
    # ISO-8601; occurrences of this revision are the fire times after it.
    revised_at: str


@dataclass(frozen=True)
class ScheduleWorkflowInput:
    plan: PlanSignal
    # ISO-8601; fire times up to here were handled (carried across continue-as-new).
    handled_until: str | None = None
    loops_before_continue: int = DEFAULT_LOOPS_BEFORE_CONTINUE


@dataclass(frozen=True)
class PlanStepInput:
    schedule: dict
    handled_until: str
    now: str


@dataclass(frozen=True)
class PlanStep:
    # The one fire time to admit now (the latest missed one after an outage), and the next one to sleep to.
    due: str | None
    next_fire: str | None


@dataclass(frozen=True)
class AdmitInput:
    plan_id: str
    revision: str
    fire_time: str


class AdmitOutcome:
    ADMITTED = "admitted"
    SKIPPED_OVERLAP = "skipped_overlap"
    # The plan moved to another revision, was paused or deleted: this timer is fenced off.
    STALE = "stale"


@workflow.defn(name=WORKFLOW_NAME)
class TaskScheduleWorkflow:
    @workflow.init
    def __init__(self, start: ScheduleWorkflowInput) -> None:
        self._plan = start.plan
        self._handled_until = _later(start.handled_until, start.plan.revised_at)
        # The generation the database said was stale; the loop waits for a newer signal instead of retrying.
        self._fenced_generation = 0

    @workflow.signal(name=REVISE_SIGNAL)
    def revise(self, plan: PlanSignal) -> None:
        # Signals can arrive late or twice (the API and discovery both send them): only a newer one counts.
        if plan.generation > self._plan.generation:
            self._plan = plan
            self._handled_until = _later(self._handled_until, plan.revised_at)
            workflow.upsert_memo({GENERATION_MEMO: plan.generation})

    @workflow.query(name=GENERATION_QUERY)
    def generation(self) -> int:
        return self._plan.generation

    @workflow.run
    async def run(self, start: ScheduleWorkflowInput) -> str:
        for _ in range(start.loops_before_continue):
            plan = self._plan
            if plan.deleted:
                return "deleted"
            if not plan.enabled or self._fenced_generation == plan.generation:
                await workflow.wait_condition(lambda seen=plan.generation: self._plan.generation != seen)
                continue
            now = workflow.now()
            step = await workflow.execute_local_activity(
                PLAN_STEP_ACTIVITY,
                PlanStepInput(schedule=plan.schedule, handled_until=self._handled_until, now=now.isoformat()),
                result_type=PlanStep,
                start_to_close_timeout=timedelta(seconds=10),
            )
            if step.due is not None and self._plan.generation == plan.generation:
                outcome = await workflow.execute_activity(
                    ADMIT_ACTIVITY,
                    AdmitInput(plan_id=plan.plan_id, revision=plan.revision, fire_time=step.due),
                    result_type=str,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
                )
                if outcome == AdmitOutcome.STALE:
                    self._fenced_generation = plan.generation
                    continue
            self._handled_until = _later(self._handled_until, now.isoformat())
            if self._plan.generation != plan.generation:
                continue
            await self._sleep_until(step.next_fire, plan.generation)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            ScheduleWorkflowInput(
                plan=self._plan,
                handled_until=self._handled_until,
                loops_before_continue=start.loops_before_continue,
            ),
            memo={GENERATION_MEMO: self._plan.generation},
        )

    async def _sleep_until(self, fire_time: str | None, generation: int) -> None:
        """Sleeps durably until the fire time, or until a newer revision arrives (None: only the latter)."""
        timeout = None
        if fire_time is not None:
            timeout = max(datetime.fromisoformat(fire_time) - workflow.now(), timedelta(0))
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._plan.generation != generation, timeout=timeout)


def _later(first: str | None, second: str) -> str:
    if first is None:
        return second
    return max(first, second, key=datetime.fromisoformat)
