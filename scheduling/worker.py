"""The Temporal worker process: plan workflows, their activities, and the discovery loop beside them."""

import asyncio
import logging
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from core.heap import freeze_startup_heap
from scheduling import selectors, services, temporal
from scheduling.activities import admit_occurrence, plan_step
from scheduling.workflows import TaskScheduleWorkflow

logger = logging.getLogger(__name__)

DISCOVERY_BATCH = 200
ACTIVITY_THREADS = 8
READY_LINE = "temporal worker ready"


def _with_fresh_connection(function):
    def run(*args):
        close_old_connections()
        try:
            return function(*args)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=False)


_unsynced_plans = _with_fresh_connection(selectors.unsynced_plan_signals)
_live_plans = _with_fresh_connection(selectors.live_plan_signals)
_mark_synced = _with_fresh_connection(services.mark_synced)


async def discover_once(client: Client, *, task_queue: str) -> int:
    """Re-signals plans Temporal has not acknowledged, and live plans whose workflow is missing or behind.

    The first set is what a failed API-time signal leaves; the second what a Temporal that lost or terminated a
    workflow leaves. Returns how many plans were signalled.
    """
    signalled = 0
    for plan in await _unsynced_plans(DISCOVERY_BATCH):
        await temporal.push_plan(client, plan, task_queue=task_queue)
        await _mark_synced(plan.plan_id, plan.generation)
        signalled += 1
    for plan in await _live_plans():
        if await temporal.workflow_is_behind(client, plan):
            await temporal.push_plan(client, plan, task_queue=task_queue)
            await _mark_synced(plan.plan_id, plan.generation)
            signalled += 1
    return signalled


async def discovery_loop(client: Client, *, task_queue: str, interval: float) -> None:
    while True:
        try:
            signalled = await discover_once(client, task_queue=task_queue)
        except RPCError as exc:
            # Temporal is unreachable or refused one plan: the next pass tries again, nothing is lost.
            logger.warning("schedule discovery failed: %s", exc)
        except DatabaseError:
            # PostgreSQL restarting: the connection is replaced on the next pass; the loop must not die.
            logger.exception("schedule discovery could not read the plans; retrying")
        else:
            if signalled:
                logger.info("schedule discovery re-signalled %d plans", signalled)
        await asyncio.sleep(interval)


async def _connect_with_retry() -> Client:
    while True:
        try:
            return await temporal.connect()
        except RuntimeError as exc:
            logger.warning("Temporal is not reachable yet (%s); retrying", exc)
            await asyncio.sleep(1)


async def run_worker(*, task_queue: str, discovery_interval: float) -> None:
    client = await _connect_with_retry()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    with ThreadPoolExecutor(max_workers=ACTIVITY_THREADS) as executor:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[TaskScheduleWorkflow],
            activities=[plan_step, admit_occurrence],
            activity_executor=executor,
        )
        async with worker:
            discovery = asyncio.create_task(discovery_loop(client, task_queue=task_queue, interval=discovery_interval))
            # Tests and operators wait for this line; logging may be configured to drop INFO.
            print(f"{READY_LINE} on task queue {task_queue}", file=sys.stdout, flush=True)
            freeze_startup_heap()
            await stop.wait()
            discovery.cancel()
