import logging
import os
import sys
from pathlib import Path

import redis
from celery import Celery, bootsteps
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
)
from django.db import close_old_connections

from core import heap, telemetry
from core.outages import Condition
from impo import worker_liveness

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
if Path(sys.argv[0]).name == "celery" and "worker" in sys.argv[1:]:
    # A worker's threads (settings.IMPO_WORKER_CONCURRENCY of them) borrow pooled connections per transaction: a
    # persistent connection per thread would hold one per run in flight (and PostgreSQL refuses the hundredth).
    os.environ.setdefault("DATABASE_POOL", "1")
    # Hundreds of runs' short transactions arrive in bursts (a window's projections, a wave of claims): a run
    # queues for a connection rather than failing its attempt while the host is busy.
    os.environ.setdefault("DATABASE_POOL_TIMEOUT_SECONDS", "30")
    # A worker's transactions are short and rarely many at once (a process's projections share one, its leases
    # one heartbeat statement): 500 runs in flight held at most 5 (bench/RESULTS.md). A host runs one worker per
    # core, so its connections are cores × this.
    os.environ.setdefault("DATABASE_POOL_MAX_SIZE", "10")

logger = logging.getLogger(__name__)

# Logged once when beats start failing and once when they succeed again, not every 3 s (docs/edge.md).
_failing_beats = Condition(logger, started="worker heartbeat failing", ended="worker heartbeat sent again")

app = Celery("impo")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The default in every thread: the apps send their wake-ups through `celery.current_app` (they sit below this
# module and never import it), including from the hint sender's own thread, where only the default is current.
app.set_default()
app.autodiscover_tasks()


class Heartbeat(bootsteps.StartStopStep):
    """Tells `/ready` this worker is alive, from the worker's own timer (a stuck pool still beats: liveness
    of the process, not of every child)."""

    requires = {"celery.worker.components:Timer"}

    def start(self, worker):
        self.worker_name = worker.hostname
        self._beat()
        self.timer_entry = worker.timer.call_repeatedly(worker_liveness.HEARTBEAT_INTERVAL_SECONDS, self._beat)

    def stop(self, worker):
        if getattr(self, "timer_entry", None) is not None:
            self.timer_entry.cancel()
        try:
            worker_liveness.stopped(self.worker_name)
        except redis.RedisError as exc:
            logger.warning("could not withdraw the heartbeat: %s", exc)

    def _beat(self):
        try:
            worker_liveness.beat(self.worker_name)
        except redis.RedisError as exc:
            # The next beat tries again; /ready reports the gap if it lasts.
            _failing_beats.failed(exc)
        else:
            _failing_beats.succeeded()


app.steps["worker"].add(Heartbeat)


class OneLinePerBrokerOutage(logging.Filter):
    """Celery's consumer logs each attempt to reach a lost broker at ERROR ("consumer: Cannot connect to …", every
    few seconds for as long as Redis is away): the first is kept, as the WARNING it is, the rest are dropped until
    the consumer logs "Connected to …" again, which ends the outage (docs/edge.md)."""

    def __init__(self):
        super().__init__()
        self._reconnecting = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("consumer: Cannot connect to"):
            if self._reconnecting:
                return False
            self._reconnecting = True
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        elif message.startswith("Connected to"):
            self._reconnecting = False
        return True


_broker_outage = OneLinePerBrokerOutage()
for _consumer_logger in ("celery.worker.consumer.consumer", "celery.worker.consumer.connection"):
    logging.getLogger(_consumer_logger).addFilter(_broker_outage)


@task_prerun.connect
@task_postrun.connect
def drop_unusable_connections(**kwargs):
    # As Django does around each request: a connection past CONN_MAX_AGE or left broken is closed, and the next
    # one used is health-checked first (settings.CELERY_DB_REUSE_MAX keeps the fixup from closing the rest).
    close_old_connections()


@worker_process_init.connect
def start_tracing(**kwargs):
    # Per prefork child, after the fork: the exporter's thread and connection belong to the child.
    telemetry.configure("impo-worker")


@worker_init.connect
def start_tracing_without_children(sender, **kwargs):
    # The threads pool runs tasks in the worker process itself, which then exits normally (atexit flushes). The pool
    # is still named as configured here (a name or a class), not yet resolved.
    pool = sender.pool_cls
    name = pool if isinstance(pool, str) else pool.__module__
    if "prefork" not in name and name != "processes":
        telemetry.configure("impo-worker")


@worker_process_shutdown.connect
def flush_traces_and_hints(**kwargs):
    # A prefork child leaves without running atexit handlers: its last hints and spans are sent here.
    from runtime import outbound

    outbound.flush_hints()
    telemetry.shutdown()


@worker_ready.connect
def freeze_the_startup_heap(**kwargs):
    heap.freeze_startup_heap()
