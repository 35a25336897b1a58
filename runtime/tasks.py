from celery import shared_task
from celery.signals import worker_ready

from core import telemetry
from rebyte.provider import provider_gateway
from runtime import selectors
from runtime.execution import driver, remote_deletes


@shared_task(name="runtime.execute_run")
def execute_run(run_id: str) -> None:
    # A wake-up only: the run's lease, not this message, decides whether this worker executes it. Every wake-up
    # (a redelivery, a successor's) is a span of the run's own trace.
    with telemetry.span("impo.run", {"impo.run.id": run_id}, parent=lambda: selectors.run_traceparent(run_id)):
        driver.execute_run(run_id, driver.worker_identity())


@worker_ready.connect
def build_provider_gateway(**kwargs):
    # The gateway is built once per process; building it in the first run would add its cost to that run.
    provider_gateway()


@shared_task(name="runtime.delete_conversation")
def delete_conversation(conversation_id: str) -> None:
    # A wake-up only: the deletion's state is in the database, and the sweeper's deletion pass drives it too.
    remote_deletes.advance_conversation(conversation_id, provider_gateway())
