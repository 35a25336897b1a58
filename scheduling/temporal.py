"""Telling Temporal about plans: signal-with-start on every change, from the API (best effort) and discovery."""

import asyncio
import logging
import uuid

from django.conf import settings
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from scheduling import selectors, services
from scheduling.models import ScheduledTask
from scheduling.workflows import (
    GENERATION_MEMO,
    REVISE_SIGNAL,
    WORKFLOW_NAME,
    PlanSignal,
    ScheduleWorkflowInput,
    workflow_id,
)

logger = logging.getLogger(__name__)


async def connect() -> Client:
    return await Client.connect(settings.TEMPORAL_ADDRESS, namespace=settings.TEMPORAL_NAMESPACE)


async def push_plan(client: Client, plan: PlanSignal, *, task_queue: str) -> None:
    """Delivers the plan's state to its workflow, starting the workflow when it is not running.

    A deleted plan is only signalled: when its workflow is already gone there is nothing left to stop, and
    starting one merely to end it would be noise.
    """
    identifier = workflow_id(plan.owner_id, plan.plan_id)
    if plan.deleted:
        try:
            await client.get_workflow_handle(identifier).signal(REVISE_SIGNAL, plan)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        return
    await client.start_workflow(
        WORKFLOW_NAME,
        ScheduleWorkflowInput(plan=plan),
        id=identifier,
        task_queue=task_queue,
        start_signal=REVISE_SIGNAL,
        start_signal_args=[plan],
        memo={GENERATION_MEMO: plan.generation},
    )


async def workflow_is_behind(client: Client, plan: PlanSignal) -> bool:
    """True when the plan's workflow is missing, closed, or holds an older generation than the database.

    Read from the server's description (the generation memo), not a query: a query needs the worker to replay
    the workflow, and a pass over every plan must not queue behind workflow tasks.
    """
    handle = client.get_workflow_handle(workflow_id(plan.owner_id, plan.plan_id))
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return True
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return True
    return await description.memo_value(GENERATION_MEMO, 0) < plan.generation


def signal_plan_best_effort(plan_id: uuid.UUID) -> None:
    """Runs after the API's commit: signals the plan's current state; on failure leaves it to discovery.

    The plan is re-read, so concurrent changes each send the newest state (the workflow ignores older
    generations). The request already succeeded; an unreachable Temporal only delays the plan until the worker's
    discovery loop finds it unsynced.
    """
    plan = ScheduledTask.objects.filter(id=plan_id).first()
    if plan is None:
        return
    signal = selectors.plan_signal(plan)

    async def send() -> None:
        await push_plan(await connect(), signal, task_queue=settings.TEMPORAL_TASK_QUEUE)

    try:
        asyncio.run(asyncio.wait_for(send(), settings.IMPO_SCHEDULE_SIGNAL_TIMEOUT_SECONDS))
    except (RPCError, RuntimeError, OSError, TimeoutError) as exc:
        logger.warning("scheduled task %s: Temporal signal failed (%s); discovery will retry", plan_id, exc)
        return
    services.mark_synced(plan.id, plan.generation)
