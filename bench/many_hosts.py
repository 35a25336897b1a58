"""Many worker hosts on one database: `python -m bench --many-hosts [--quick]`.

Several worker hosts (each `python -m impo.worker_host`, a process group with its own pools, heartbeat, group
commit and Celery queue, as on machines of their own) share the run's PostgreSQL and Redis. Each section sends one
message to each of its users' Main Chats (the bench process admits them, as a web process would, and wakes each
run on one host's queue in turn), and reports what PostgreSQL spent on them:

- CPU seconds of the database's backends, read from /proc (user + system) of every backend connected to the run's
  database (pg_stat_activity), sampled every SAMPLE_SECONDS: a backend's CPU from the first to the last time it is
  seen. The server's shared processes (checkpointer, WAL writer, autovacuum) serve every database of the server
  and are not counted; nor is the WAL they write.
- statements: the worker hosts' (bench/counted_settings.py) and the admissions' (counted here);
- transactions: pg_stat_database's commits and rollbacks of the run's database (less the sampler's own).

Three sections: first messages (each user's agent and session created, a one-delta reply), later messages with a
one-delta reply, and later messages streamed at 10 deltas/s. The per-delta cost is the difference of the last two
over the deltas it adds. Turns per second per database core is 1 / (CPU per turn); turns in flight per database
core is that × the turn's length (the per-delta cost scales with deltas, not with the turn's length).
"""

import os
import threading
import time
from dataclasses import dataclass

from bench.admission import _CLOCK_TICKS, cpu_seconds
from bench.harness import Figure, create_users
from bench.inflight_load import message_text, pace, run_outcomes, wait_settled
from bench.worker_host import LEASE_SECONDS
from devtools.stack import Stack, WorkerProcess

SAMPLE_SECONDS = 0.25
HOST_APP_PREFIX = "impo-many-host-"
ADMITTING_THREADS = 4
DELTAS_PER_SECOND = 10


@dataclass(frozen=True)
class ManyHostsSizes:
    hosts: int
    processes_per_host: int
    turns_per_host: int
    turn_seconds: int


FULL = ManyHostsSizes(hosts=3, processes_per_host=1, turns_per_host=100, turn_seconds=10)
QUICK = ManyHostsSizes(hosts=3, processes_per_host=1, turns_per_host=15, turn_seconds=4)


@dataclass
class Host:
    worker: WorkerProcess
    queue: str


def start_hosts(stack: Stack, sizes: ManyHostsSizes) -> list[Host]:
    hosts = []
    for index in range(sizes.hosts):
        queue = f"{stack.env.get('CELERY_QUEUE', 'impo')}-many-{index}"
        env = {
            "PGAPPNAME": f"{HOST_APP_PREFIX}{index}",
            "DJANGO_SETTINGS_MODULE": "bench.counted_settings",
            "LOG_LEVEL": "WARNING",
            "IMPO_RUN_LEASE_SECONDS": str(LEASE_SECONDS),
        }
        worker = stack.start_worker(
            f"many-host-{index}", queue=queue, env=env, host_processes=sizes.processes_per_host, wait=False
        )
        hosts.append(Host(worker, queue))
    for host in hosts:
        stack.wait_ready(host.worker)
    return hosts


class PostgresCpu:
    """The CPU of the run's database's backends, sampled in a thread of its own while it is entered."""

    # One row whatever the backends: the database's transactions so far, and its backends (but the sampler's).
    _BACKENDS = (
        "SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()),"
        " coalesce(array_agg(pid), '{}'), coalesce(array_agg(application_name), '{}') FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )

    def __init__(self):
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.app_of: dict[int, str] = {}
        self.transactions: list[int] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_forever, name="postgres-cpu", daemon=True)

    def __enter__(self):
        self._sample(initial=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()
        time.sleep(1.5)  # a backend reports its transactions at most once a second
        self._sample(initial=False)

    def seconds(self, *, workers: bool) -> float:
        return sum(
            self.last[pid] - self.first.get(pid, 0.0)
            for pid in self.last
            if self.app_of[pid].startswith(HOST_APP_PREFIX) == workers
        )

    def transaction_count(self) -> int:
        # Each sample is one transaction of the sampler's own (autocommit).
        return self.transactions[-1] - self.transactions[0] - (self.samples - 1)

    def _sample_forever(self):
        from django.db import connection

        try:
            while not self._stop.wait(SAMPLE_SECONDS):
                self._sample(initial=False)
        finally:
            connection.close()

    def _sample(self, *, initial: bool) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(self._BACKENDS)
            transactions, pids, apps = cursor.fetchone()
        self.samples += 1
        self.transactions.append(transactions)
        for pid, app in zip(pids, apps, strict=True):
            cpu = _process_cpu(pid)
            if cpu is None:
                continue
            self.app_of[pid] = app
            if initial:
                self.first[pid] = cpu
            self.last[pid] = cpu


def _process_cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def worker_statements() -> int:
    import redis
    from django.conf import settings

    from bench.counted_settings import STATEMENTS_KEY

    return int(redis.Redis.from_url(settings.REDIS_URL).get(STATEMENTS_KEY) or 0)


class Admissions:
    """One message to each owner's Main Chat from a few threads, each on a connection it keeps until `close()`
    (a backend that exited between two samples would take its CPU with it); counts their statements."""

    def __init__(self, owners: list, texts: list[str], label: str):
        self.statements = 0
        self.submission_ids: list = [None] * len(owners)
        self._work = list(enumerate(zip(owners, texts, strict=True)))
        self._label = label
        self._lock = threading.Lock()
        self._done = threading.Barrier(ADMITTING_THREADS + 1)
        self._release = threading.Event()
        self._threads = [threading.Thread(target=self._admit, daemon=True) for _ in range(ADMITTING_THREADS)]

    def run(self) -> list:
        for thread in self._threads:
            thread.start()
        self._done.wait()
        return self.submission_ids

    def close(self) -> None:
        self._release.set()
        for thread in self._threads:
            thread.join()

    def _count(self, execute, sql, params, many, context):
        with self._lock:
            self.statements += 1
        return execute(sql, params, many, context)

    def _admit(self):
        from django.db import connection

        from runtime.services.admission import MessageCommand
        from runtime.services.commands import submit_main_chat_message

        try:
            try:
                with connection.execute_wrapper(self._count):
                    while True:
                        with self._lock:
                            if not self._work:
                                break
                            index, (owner, text) = self._work.pop()
                        command = MessageCommand(client_message_id=f"{self._label}-{index}-{os.getpid()}", text=text)
                        submitted = submit_main_chat_message(owner=owner, command=command)
                        self.submission_ids[index] = submitted.submission_id
            except BaseException:
                self._done.abort()  # the bench stops instead of waiting for this thread
                raise
            self._done.wait()
            self._release.wait()
        finally:
            connection.close()


def wake_on_hosts(submission_ids: list, hosts: list[Host]) -> list[str]:
    """Each run woken on one host's queue in turn (the admission's own wake-up went to the bench's queue, which no
    host reads)."""
    from impo.celery import app
    from runtime.models import Run
    from runtime.outbound import EXECUTE_RUN_TASK

    runs = dict(Run.objects.filter(submission_id__in=submission_ids).values_list("submission_id", "id"))
    run_ids = [str(runs[submission_id]) for submission_id in submission_ids]
    for index, run_id in enumerate(run_ids):
        app.send_task(EXECUTE_RUN_TASK, args=[run_id], queue=hosts[index % len(hosts)].queue)
    return run_ids


@dataclass
class Section:
    name: str
    turns: int
    deltas_per_turn: int
    elapsed: float
    postgres_seconds: float
    postgres_admission_seconds: float
    statements: int
    admission_statements: int
    transactions: int
    worker_seconds: float

    @property
    def postgres_ms_per_turn(self) -> float:
        return 1000 * (self.postgres_seconds + self.postgres_admission_seconds) / self.turns


def section(stack: Stack, hosts: list[Host], owners: list, name: str, *, seconds: float, deltas: int) -> Section:
    pace(stack, turn_seconds=seconds, deltas=deltas)
    workers_before = sum(cpu_seconds(host.worker.process.pid) for host in hosts)
    statements_before = worker_statements()
    started = time.monotonic()
    with PostgresCpu() as postgres:
        admissions = Admissions(owners, [message_text(i) for i in range(len(owners))], name)
        try:
            run_ids = wake_on_hosts(admissions.run(), hosts)
            wait_settled(run_ids, timeout=seconds * 4 + 180)
            elapsed = time.monotonic() - started
            time.sleep(2 * 0.5)  # the hosts' last statement counts reach Redis (counted_settings flushes every 0.5 s)
        finally:
            admissions.close()
    outcomes = run_outcomes(run_ids)
    if outcomes.get("completed", 0) != len(run_ids):
        raise RuntimeError(f"{name}: outcomes {dict(outcomes)}")
    return Section(
        name,
        turns=len(owners),
        deltas_per_turn=deltas,
        elapsed=elapsed,
        postgres_seconds=postgres.seconds(workers=True),
        postgres_admission_seconds=postgres.seconds(workers=False),
        statements=worker_statements() - statements_before,
        admission_statements=admissions.statements,
        transactions=postgres.transaction_count(),
        worker_seconds=sum(cpu_seconds(host.worker.process.pid) for host in hosts) - workers_before,
    )


def _figure(measured: Section, seconds: float) -> Figure:
    per_core = 1000 / measured.postgres_ms_per_turn
    return Figure(
        f"PostgreSQL CPU per turn, {measured.name} ({measured.deltas_per_turn} deltas)",
        measured.postgres_ms_per_turn,
        "ms",
        higher_is_better=False,
        notes=[
            f"{measured.turns} turns in {measured.elapsed:.1f} s: PostgreSQL {measured.postgres_seconds:.2f} s for the "
            f"worker hosts' backends + {measured.postgres_admission_seconds:.2f} s for the admissions' "
            f"({100 * (measured.postgres_seconds + measured.postgres_admission_seconds) / measured.elapsed:.0f} % of "
            f"one core over the section); worker hosts {measured.worker_seconds:.1f} s of CPU",
            f"statements per turn {(measured.statements + measured.admission_statements) / measured.turns:.1f} "
            f"({measured.admission_statements / measured.turns:.1f} of them the admission's), transactions per turn "
            f"{measured.transactions / measured.turns:.1f}",
            f"so one database core sustains about {per_core:.0f} such turns per second, "
            f"{per_core * seconds:.0f} in flight at {seconds:g} s a turn",
        ],
    )


def measure(stack: Stack, sizes: ManyHostsSizes) -> list[Figure]:
    from django.contrib.auth import get_user_model

    from impo.celery import app

    app.control.purge()
    turns = sizes.hosts * sizes.turns_per_host
    users = create_users(turns, f"many-{os.getpid()}")
    owners = list(get_user_model().objects.filter(id__in=[user_id for user_id, _ in users]).order_by("id"))
    hosts = start_hosts(stack, sizes)
    seconds = sizes.turn_seconds
    try:
        first = section(stack, hosts, owners, "first messages", seconds=1, deltas=1)
        single = section(stack, hosts, owners, "later messages", seconds=seconds, deltas=1)
        streamed = section(
            stack, hosts, owners, "later messages streamed", seconds=seconds, deltas=seconds * DELTAS_PER_SECOND
        )
    finally:
        for host in hosts:
            host.worker.stop()
        stack.double.configure(delta_delay_ms=0, delta_chunks=4)
    added_deltas = streamed.turns * (streamed.deltas_per_turn - 1)
    postgres_per_delta = (streamed.postgres_ms_per_turn - single.postgres_ms_per_turn) * streamed.turns / added_deltas
    statements_per_delta = (
        (streamed.statements + streamed.admission_statements) - (single.statements + single.admission_statements)
    ) / added_deltas
    figures = [_figure(first, 1), _figure(single, seconds), _figure(streamed, seconds)]
    figures.append(
        Figure(
            f"PostgreSQL CPU per delta ({DELTAS_PER_SECOND} deltas/s a turn, {turns} turns in flight)",
            postgres_per_delta,
            "ms",
            higher_is_better=False,
            notes=[
                f"statements per delta {statements_per_delta:.2f}, transactions per delta "
                f"{(streamed.transactions - single.transactions) / added_deltas:.2f} (the streamed section less the "
                "one-delta one, over the deltas it adds)",
                f"{sizes.hosts} worker hosts of {sizes.processes_per_host} process(es) each, one PostgreSQL and Redis",
            ],
        )
    )
    return figures
