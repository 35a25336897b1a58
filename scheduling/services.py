"""Write paths of scheduling. Each entry point is one durable transaction.

Locks are taken in scheduling/locks.py (a plan) and runtime/locks.py (the owner's row, to count live plans on
create), in the order of docs/locking.md: the user row, then a plan row; admission then takes runtime's locks
inside the plan's transaction.

Temporal hears about a change only after it commits (`_signal_after_commit`): a plan is never timed by a
workflow before the database has it, and a lost signal is found again by the discovery loop, which re-signals
every plan whose `synced_generation` is behind.
"""

import asyncio
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from temporalio.service import RPCError

from core.error_codes import ErrorCode
from core.errors import Conflict, Gone, InvalidRequest, NotFound
from runtime import locks as runtime_locks
from runtime import outbound
from runtime.services.admission import MessageCommand
from runtime.services.commands import open_task
from scheduling import locks, selectors, temporal
from scheduling.models import Occurrence, OccurrenceState, Plan
from scheduling.schedules import Schedule, ScheduleError, next_fire_after, parse_schedule
from scheduling.workflows import AdmitOutcome

MAX_LIVE_PLANS = 50

# Names the Submission of each occurrence: the same plan and fire time always yield the same clientMessageId.
_OCCURRENCE_NAMESPACE = uuid.UUID("5b0f3a8e-3c1d-4f57-9a51-6f1c0f7c2e10")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlanCommand:
    """A plan's content as sent by the client; `schedule` is the raw object, validated here."""

    title: str
    goal: str
    schedule: object
    enabled: bool


def create_plan(*, owner, client_request_id: str, command: PlanCommand, now: datetime | None = None) -> Plan:
    """Saves a new plan, or returns the plan this request id already created with the same payload."""
    now = now or timezone.now()
    fingerprint = _fingerprint(command, _stored_schedule(command.schedule))
    replay = _replayed_plan(owner, client_request_id, fingerprint)
    if replay is not None:
        return replay
    schedule = _new_schedule(command.schedule, now)
    try:
        with transaction.atomic(durable=True):
            runtime_locks.lock_owner(owner)
            if Plan.objects.filter(owner=owner, deleted_at__isnull=True).count() >= MAX_LIVE_PLANS:
                raise Conflict(
                    f"An account can have at most {MAX_LIVE_PLANS} scheduled tasks; delete one first.",
                    code=ErrorCode.SCHEDULE_LIMIT_REACHED,
                )
            plan = Plan.objects.create(
                owner=owner,
                client_request_id=client_request_id,
                request_fingerprint=fingerprint,
                title=command.title,
                goal=command.goal,
                schedule=schedule.to_json(),
                enabled=command.enabled,
                revised_at=now,
                next_run_at=_next_run_at(schedule, command.enabled, now),
                created_at=now,
                updated_at=now,
            )
            _signal_after_commit(plan.id)
            return plan
    except IntegrityError:
        # A concurrent post of the same request id won the unique constraint; its plan is the answer.
        replay = _replayed_plan(owner, client_request_id, fingerprint)
        if replay is None:
            raise
        return replay


def update_plan(
    *, owner, plan_id: uuid.UUID, revision: uuid.UUID, command: PlanCommand, now: datetime | None = None
) -> Plan:
    """Replaces the plan's content if `revision` is current; an exact retry of the last change returns the plan."""
    now = now or timezone.now()
    stored = _stored_schedule(command.schedule)
    fingerprint = _fingerprint(command, stored, base_revision=revision)
    with transaction.atomic(durable=True):
        plan = _locked_live_plan(owner, plan_id)
        if plan.revision != revision:
            if plan.previous_revision == revision and plan.change_fingerprint == fingerprint:
                return plan
            raise Conflict(
                "The scheduled task changed since this revision; reload it.", code=ErrorCode.SCHEDULE_CHANGED
            )
        # An unchanged schedule is kept as is (a once-plan that already fired can still be renamed); a new one
        # must be valid now.
        schedule = stored if stored.to_json() == plan.schedule else _new_schedule(command.schedule, now)
        content = (command.title, command.goal, schedule.to_json(), command.enabled)
        if content == (plan.title, plan.goal, plan.schedule, plan.enabled):
            return plan
        plan.title, plan.goal, plan.schedule, plan.enabled = content
        plan.previous_revision = plan.revision
        plan.change_fingerprint = fingerprint
        _new_revision(plan, now)
        plan.next_run_at = _next_run_at(schedule, command.enabled, now)
        plan.save()
        _signal_after_commit(plan.id)
        return plan


def delete_plan(*, owner, plan_id: uuid.UUID, revision: uuid.UUID, now: datetime | None = None) -> None:
    """Tombstones the plan: it stops firing, its history stays, and Tasks it admitted keep running."""
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        plan = locks.lock_plan(plan_id, owner=owner)
        if plan is None:
            raise NotFound("No such scheduled task.")
        if plan.deleted_at is not None:
            return  # deleting a deleted plan answers as the first delete did, whatever revision it names
        if plan.revision != revision:
            raise Conflict(
                "The scheduled task changed since this revision; reload it.", code=ErrorCode.SCHEDULE_CHANGED
            )
        _tombstone(plan, now)


def delete_plans_of(owner, *, now: datetime | None = None) -> None:
    """Every live plan of the owner tombstoned as `delete_plan` does (an account's deletion: joins its transaction,
    which holds the owner's row); each workflow is signalled after commit and stops, or the discovery loop
    re-signals it (`plans_stopped` tells when all have heard)."""
    now = now or timezone.now()
    for plan_id in selectors.live_plans_for_owner(owner).values_list("id", flat=True):
        plan = locks.lock_plan(plan_id)
        if plan is not None and plan.deleted_at is None:
            _tombstone(plan, now)


def _tombstone(plan: Plan, now: datetime) -> None:
    """The plan stops firing (its workflow told after commit); its history stays."""
    plan.deleted_at = now
    plan.next_run_at = None
    plan.generation += 1
    plan.updated_at = now
    plan.save()
    _signal_after_commit(plan.id)


def admit_occurrence(
    *, plan_id: uuid.UUID, revision: uuid.UUID, fire_time: datetime, now: datetime | None = None
) -> str:
    """Handles one fire time of one revision, once: admits a Task, records an overlap skip, or refuses.

    Idempotent on (plan, fire time): a repeated execution finds the Occurrence row the first one committed
    and reports its outcome, so Temporal retrying the activity never opens a second Task. A timer set for
    another revision, or for a paused or deleted plan, is refused (`stale`) and changes nothing.
    """
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        plan = locks.lock_plan(plan_id)
        if plan is None:
            return AdmitOutcome.STALE
        handled = Occurrence.objects.filter(plan=plan, scheduled_at=fire_time).first()
        if handled is not None:
            return handled.state
        if plan.deleted_at is not None or not plan.enabled or plan.revision != revision:
            return AdmitOutcome.STALE
        task_id = None
        if selectors.previous_task_is_active(plan):
            state = OccurrenceState.SKIPPED_OVERLAP
        else:
            state = OccurrenceState.ADMITTED
            receipt = open_task(
                owner=plan.owner,
                command=MessageCommand(
                    client_message_id=occurrence_client_message_id(plan.id, fire_time),
                    text=plan.goal,
                    client_context=occurrence_client_context(plan, fire_time),
                ),
                title=plan.title,
            )
            task_id = receipt.task_id
        Occurrence.objects.create(
            plan=plan, revision=plan.revision, scheduled_at=fire_time, state=state, task_id=task_id
        )
        plan.next_run_at = next_fire_after(Schedule.from_json(plan.schedule), max(fire_time, now))
        plan.save(update_fields=["next_run_at"])
        return state


def occurrence_client_context(plan: Plan, fire_time: datetime) -> dict:
    """What a client would have said at the fire time: the plan's zone, and that moment on its wall clock."""
    zone = Schedule.from_json(plan.schedule).time_zone
    return {"timeZone": zone, "currentDate": fire_time.astimezone(ZoneInfo(zone)).isoformat()}


def occurrence_client_message_id(plan_id: uuid.UUID, fire_time: datetime) -> str:
    return str(uuid.uuid5(_OCCURRENCE_NAMESPACE, f"{plan_id}/{fire_time.astimezone(UTC).isoformat()}"))


def mark_synced(plan_id: uuid.UUID, generation: int) -> None:
    """Records that Temporal acknowledged this generation of the plan (never moving backwards)."""
    Plan.objects.filter(id=plan_id, synced_generation__lt=generation).update(synced_generation=generation)


def _signal_after_commit(plan_id: uuid.UUID) -> None:
    outbound.send_after_commit(lambda: signal_plan_best_effort(plan_id))


def signal_plan_best_effort(plan_id: uuid.UUID) -> None:
    """Runs after the API's commit: signals the plan's current state; on failure leaves it to discovery.

    The plan is re-read, so concurrent changes each send the newest state (the workflow ignores older
    generations). The request already succeeded; an unreachable Temporal only delays the plan until the worker's
    discovery loop finds it unsynced.
    """
    plan = Plan.objects.filter(id=plan_id).first()
    if plan is None:
        return
    signal = selectors.plan_signal(plan)

    async def send() -> None:
        await temporal.push_plan(await temporal.connect(), signal, task_queue=settings.TEMPORAL_TASK_QUEUE)

    try:
        asyncio.run(asyncio.wait_for(send(), settings.IMPO_SCHEDULE_SIGNAL_TIMEOUT_SECONDS))
    except (RPCError, RuntimeError, OSError, TimeoutError) as exc:
        logger.warning("scheduled task %s: Temporal signal failed (%s); discovery will retry", plan_id, exc)
        return
    mark_synced(plan.id, plan.generation)


def _new_revision(plan: Plan, now: datetime) -> None:
    plan.revision = uuid.uuid4()
    plan.generation += 1
    plan.revised_at = now
    plan.updated_at = now


def _next_run_at(schedule: Schedule, enabled: bool, now: datetime) -> datetime | None:
    return next_fire_after(schedule, now) if enabled else None


def _stored_schedule(raw: object) -> Schedule:
    """The schedule's canonical form, without the "runAt is in the future" rule (a replay may come later)."""
    try:
        return Schedule.from_json(raw)
    except ScheduleError as exc:
        raise _refusal(exc) from None


def _new_schedule(raw: object, now: datetime) -> Schedule:
    try:
        return parse_schedule(raw, now=now)
    except ScheduleError as exc:
        raise _refusal(exc) from None


def _refusal(exc: ScheduleError) -> InvalidRequest:
    # `fields` as a validation error has it, so a form marks the field whichever layer refused it.
    return InvalidRequest(str(exc), code=exc.code, details={"fields": {exc.field: exc.message}})


def _fingerprint(command: PlanCommand, schedule: Schedule, *, base_revision: uuid.UUID | None = None) -> str:
    canonical = json.dumps(
        {
            "baseRevision": str(base_revision) if base_revision else None,
            "title": command.title,
            "goal": command.goal,
            "schedule": schedule.to_json(),
            "enabled": command.enabled,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replayed_plan(owner, client_request_id: str, fingerprint: str) -> Plan | None:
    plan = Plan.objects.filter(owner=owner, client_request_id=client_request_id).first()
    if plan is None:
        return None
    if plan.request_fingerprint != fingerprint:
        raise Conflict(
            "This clientRequestId was already used for a different scheduled task.", code=ErrorCode.IDEMPOTENCY_CONFLICT
        )
    if plan.deleted_at is not None:
        raise Gone("This clientRequestId created a scheduled task that was deleted.", code=ErrorCode.SCHEDULE_DELETED)
    return plan


def _locked_live_plan(owner, plan_id: uuid.UUID) -> Plan:
    """The owner's plan, locked; a change to a tombstoned one is 410 `schedule_deleted`."""
    plan = locks.lock_plan(plan_id, owner=owner)
    if plan is None:
        raise NotFound("No such scheduled task.")
    if plan.deleted_at is not None:
        raise Gone("This scheduled task was deleted.", code=ErrorCode.SCHEDULE_DELETED)
    return plan
