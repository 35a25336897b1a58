"""Telling Temporal about plans: signal-with-start on every change, from the API (best effort) and discovery.

No Django here beyond settings: the services and the discovery loop decide what to send and record what was.
"""

from django.conf import settings
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from scheduling.workflows import (
    GENERATION_MEMO,
    REVISE_SIGNAL,
    WORKFLOW_NAME,
    PlanSignal,
    ScheduleWorkflowInput,
    workflow_id,
)


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
