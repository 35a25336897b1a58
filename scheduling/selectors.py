"""Read paths of scheduling, shaped for the ICA v1 wire format. Client reads are scoped to an owner."""

import base64
import binascii
import uuid
from datetime import datetime

from django.db.models import F, Q

from core.error_codes import ErrorCode
from core.errors import InvalidRequest, NotFound
from runtime.models import ACTIVE_RUN_STATES, Run
from runtime.selectors import task_statuses
from scheduling.models import Occurrence, OccurrenceState, Plan
from scheduling.workflows import PlanSignal

RUNS_PAGE_SIZE = 30


def live_plans_for_owner(owner):
    return Plan.objects.filter(owner=owner, deleted_at__isnull=True).order_by("created_at", "id")


def plan_for_owner(owner, plan_id: uuid.UUID) -> Plan:
    """Another user's plan and a tombstoned one both look like no plan at all."""
    plan = live_plans_for_owner(owner).filter(id=plan_id).first()
    if plan is None:
        raise NotFound("No such scheduled task.")
    return plan


def plan_to_wire(plan: Plan) -> dict:
    return {
        "id": str(plan.id),
        "title": plan.title,
        "goal": plan.goal,
        "schedule": plan.schedule,
        "enabled": plan.enabled,
        "revision": str(plan.revision),
        "nextRunAt": _iso(plan.next_run_at),
        "createdAt": _iso(plan.created_at),
        "updatedAt": _iso(plan.updated_at),
    }


def occurrences_page(plan: Plan, *, before: str | None) -> dict:
    """Newest first, 30 a page (the wire calls them `runs`); `nextCursor` continues after the last occurrence on this
    page (null at the end)."""
    occurrences = Occurrence.objects.filter(plan=plan)
    if before is not None:
        occurrences = occurrences.filter(scheduled_at__lt=_decode_cursor(before))
    page = list(occurrences.order_by("-scheduled_at")[: RUNS_PAGE_SIZE + 1])
    has_more = len(page) > RUNS_PAGE_SIZE
    page = page[:RUNS_PAGE_SIZE]
    statuses = task_statuses([occurrence.task_id for occurrence in page if occurrence.task_id])
    return {
        "runs": [occurrence_to_wire(occurrence, statuses) for occurrence in page],
        "nextCursor": _encode_cursor(page[-1].scheduled_at) if has_more else None,
    }


def occurrence_to_wire(occurrence: Occurrence, task_statuses: dict) -> dict:
    """An admitted occurrence shows its Task's current status; a skip shows `skipped_overlap`."""
    return {
        "id": str(occurrence.id),
        "taskId": str(occurrence.task_id) if occurrence.task_id else None,
        "scheduledAt": _iso(occurrence.scheduled_at),
        "createdAt": _iso(occurrence.created_at),
        "status": task_statuses[occurrence.task_id] if occurrence.task_id else occurrence.state,
    }


def previous_task_is_active(plan: Plan) -> bool:
    """Whether the Task this plan admitted last is still at work: its latest run is not yet terminal.

    pending_reconciliation counts as active: its outcome is unknown, and a second Task beside it would be
    exactly the overlap the skip exists to prevent.
    """
    previous = (
        Occurrence.objects.filter(plan=plan, state=OccurrenceState.ADMITTED)
        .select_related("task")
        .order_by("-scheduled_at")
        .first()
    )
    if previous is None:
        return False
    latest_state = (
        Run.objects.filter(submission__conversation_id=previous.task.conversation_id)
        .order_by("-submission__created_at")
        .values_list("state", flat=True)
        .first()
    )
    return latest_state in ACTIVE_RUN_STATES


def plan_signal(plan: Plan) -> PlanSignal:
    return PlanSignal(
        plan_id=str(plan.id),
        owner_id=plan.owner_id,
        generation=plan.generation,
        revision=str(plan.revision),
        schedule=plan.schedule,
        enabled=plan.enabled,
        deleted=plan.deleted_at is not None,
        revised_at=plan.revised_at.isoformat(),
    )


def unsynced_plan_signals(limit: int) -> list[PlanSignal]:
    """Plans whose latest change Temporal has not acknowledged (the API's signal failed or never ran)."""
    plans = Plan.objects.filter(synced_generation__lt=F("generation")).order_by("updated_at")[:limit]
    return [plan_signal(plan) for plan in plans]


def plans_stopped(owner_id) -> bool:
    """Whether every plan of the owner is deleted and its workflow acknowledged it (so it has stopped)."""
    plans = Plan.objects.filter(owner_id=owner_id)
    return not plans.filter(Q(deleted_at__isnull=True) | Q(synced_generation__lt=F("generation"))).exists()


def live_plan_signals() -> list[PlanSignal]:
    return [plan_signal(plan) for plan in Plan.objects.filter(deleted_at__isnull=True).order_by("id")]


_NOT_A_CURSOR = "before: is not a cursor this endpoint returned."


def _encode_cursor(scheduled_at: datetime) -> str:
    return base64.urlsafe_b64encode(scheduled_at.isoformat().encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> datetime:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        value = datetime.fromisoformat(text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidRequest(_NOT_A_CURSOR, code=ErrorCode.INVALID_CURSOR) from None
    if value.utcoffset() is None:
        raise InvalidRequest(_NOT_A_CURSOR, code=ErrorCode.INVALID_CURSOR)
    return value


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
