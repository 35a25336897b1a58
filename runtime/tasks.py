from celery import shared_task

from runtime import execution


@shared_task(name="runtime.execute_run")
def execute_run(run_id: str) -> None:
    # A wake-up only: the run's lease, not this message, decides whether this worker executes it.
    execution.execute_run(run_id, execution.worker_identity())
