import sys
import uuid
from dataclasses import dataclass

import pytest

from devtools.stack import STARTUP_SECONDS, ServiceProcess, settings_database_url, wait_until


@dataclass(frozen=True)
class SchedulingWorker:
    process: ServiceProcess
    address: str
    task_queue: str


@pytest.fixture(scope="module")
def scheduling_worker(temporal_address, django_db_setup):
    """`manage.py temporal_worker` against the test database, on a task queue of its own."""

    from scheduling.worker import READY_LINE

    task_queue = f"impo-scheduling-test-{uuid.uuid4()}"
    process = ServiceProcess(
        "temporal-worker",
        [
            sys.executable,
            "manage.py",
            "temporal_worker",
            "--task-queue",
            task_queue,
            "--discovery-interval",
            "0.5",
        ],
        env={
            "DATABASE_URL": settings_database_url(),
            "TEMPORAL_ADDRESS": temporal_address,
            "TEMPORAL_TASK_QUEUE": task_queue,
        },
    )

    def ready() -> bool:
        if not process.alive:
            raise RuntimeError(f"the temporal worker exited:\n{process.log_text()[-3000:]}")
        return READY_LINE in process.log_text()

    wait_until(ready, timeout=STARTUP_SECONDS, what=f"the temporal worker (log: {process.log_path})")
    yield SchedulingWorker(process=process, address=temporal_address, task_queue=task_queue)
    process.stop()


@pytest.fixture
def temporal(scheduling_worker, settings) -> SchedulingWorker:
    """Points this process's API-time signals at the worker's Temporal server and task queue."""
    settings.TEMPORAL_ADDRESS = scheduling_worker.address
    settings.TEMPORAL_TASK_QUEUE = scheduling_worker.task_queue
    return scheduling_worker
