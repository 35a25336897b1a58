"""Execution: echo runs claimed and completed per second by 1 and 2 workers, the claim itself against a bare
`SELECT … FOR UPDATE SKIP LOCKED` loop doing the same lease write on a plain table, and what one echo run costs
the database (statements, write transactions, the transactions before its first delta) and the CPU.
"""

import statistics
import threading
import time
import uuid

from bench.harness import Figure, retire_unfinished_runs
from devtools.stack import Stack, wait_until


def admit_runs(owner_ids: list[int], count: int, label: str, *, one_conversation_each: bool = False) -> list[uuid.UUID]:
    """`count` accepted messages spread over the owners' Main Chats, or each a Task in a conversation of its own
    (so each run is its conversation's only writer); returns their run ids."""
    from django.contrib.auth import get_user_model

    from runtime.models import Run
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import create_task, submit_main_chat_message

    admit = create_task if one_conversation_each else submit_main_chat_message
    owners = list(get_user_model().objects.filter(id__in=owner_ids))
    submission_ids = [
        admit(
            owner=owners[index % len(owners)],
            command=MessageCommand(client_message_id=f"{label}-{index}-{uuid.uuid4()}", text=f"run {index}"),
        ).submission_id
        for index in range(count)
    ]
    return list(Run.objects.filter(submission_id__in=submission_ids).values_list("id", flat=True))


def completed_runs_per_second(stack: Stack, owner_ids: list[int], *, workers: int, count: int) -> float:
    """Workers are up and idle before the first admission; the rate is read off the runs' own timestamps."""
    from django.db.models import Max, Min

    from runtime.models import TERMINAL_RUN_STATES, Run, RunState

    processes = [stack.start_worker(f"bench-worker-{index}") for index in range(workers)]
    try:
        run_ids = admit_runs(owner_ids, count, f"exec{workers}")
        runs = Run.objects.filter(id__in=run_ids)
        wait_until(
            lambda: runs.filter(state__in=TERMINAL_RUN_STATES).count() == count,
            timeout=60 + count,
            interval=0.2,
            what=f"{count} runs to finish",
        )
        if runs.exclude(state=RunState.COMPLETED).exists():
            raise RuntimeError("some benchmark runs did not complete: the figure would be meaningless")
        window = runs.aggregate(first=Min("started_at"), last=Max("finished_at"))
        return count / (window["last"] - window["first"]).total_seconds()
    finally:
        for process in processes:
            process.stop()


def claim_function_rate(owner_ids: list[int], count: int) -> float:
    """`claim_run` over queued runs nobody else is claiming (no worker runs; the wake-ups are purged).

    Each run is a Task of its own: a conversation's later runs wait for its earlier ones (one writer), so
    claims of one conversation's queue would measure refusals, not claims.
    """
    from impo.celery import app
    from runtime.services.claims import claim_run

    run_ids = admit_runs(owner_ids, count, "claim", one_conversation_each=True)
    app.control.purge()
    started = time.perf_counter()
    for run_id in run_ids:
        if claim_run(run_id, "bench-claimer") is None:
            raise RuntimeError("a queued run could not be claimed")
    rate = count / (time.perf_counter() - started)
    retire_unfinished_runs()
    return rate


def bare_skip_locked_rate(count: int) -> float:
    """The lease write alone: lock one row by id with SKIP LOCKED, bump owner, generation and expiry, commit."""
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_claim_rows (id uuid PRIMARY KEY, state text NOT NULL, "
            "lease_owner text NOT NULL DEFAULT '', lease_generation int NOT NULL DEFAULT 0, lease_expires_at "
            "timestamptz, attempts int NOT NULL DEFAULT 0)"
        )
        cursor.execute("TRUNCATE bench_claim_rows")
        ids = [uuid.uuid4() for _ in range(count)]
        cursor.executemany("INSERT INTO bench_claim_rows (id, state) VALUES (%s, 'queued')", [(i,) for i in ids])
    started = time.perf_counter()
    for row_id in ids:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT id FROM bench_claim_rows WHERE id = %s FOR UPDATE SKIP LOCKED", [row_id])
            if cursor.fetchone() is None:
                raise RuntimeError("a baseline row could not be locked")
            cursor.execute(
                "UPDATE bench_claim_rows SET state = 'running', lease_owner = %s, attempts = attempts + 1, "
                "lease_generation = lease_generation + 1, lease_expires_at = now() + interval '30 seconds' "
                "WHERE id = %s",
                ["bench-claimer", row_id],
            )
    return count / (time.perf_counter() - started)


class DatabaseWork:
    """Counts the statements and write transactions of every connection this process opens, in every thread.

    A write transaction is a transaction block in which an INSERT, UPDATE, DELETE or locking SELECT ran (counted
    when it commits), or one such statement in autocommit. Read-only statements count as statements only.
    """

    WRITES = ("INSERT", "UPDATE", "DELETE")

    def __init__(self):
        self._lock = threading.Lock()
        self.statements = 0
        self.write_transactions = 0
        self.first_delta_after: int | None = None
        self._connections = []

    def __enter__(self):
        from django.db import connections
        from django.db.backends.signals import connection_created

        connection_created.connect(self._install, weak=False)
        for connection in connections.all(initialized_only=True):
            self._install(connection=connection)
        return self

    def __exit__(self, *exc_info):
        from django.db.backends.signals import connection_created

        connection_created.disconnect(self._install)
        for connection in self._connections:
            connection.execute_wrappers.remove(self._count)

    def _install(self, sender=None, connection=None, **kwargs):
        connection.execute_wrappers.append(self._count)
        self._connections.append(connection)

    def _count(self, execute, sql, params, many, context):
        connection = context["connection"]
        text = sql.upper()
        head = text.lstrip().split(None, 1)[0] if text.strip() else ""
        modifies = head in self.WRITES or (head == "WITH" and any(f"{word} " in text for word in self.WRITES))
        writes = modifies or "FOR UPDATE" in text or "FOR NO KEY UPDATE" in text
        with self._lock:
            self.statements += 1
            first_delta = "INSERT INTO" in text and "RUNTIME_EVENT" in text and "text.delta" in _flattened(params)
            if first_delta and self.first_delta_after is None:
                self.first_delta_after = self.write_transactions
        if writes:
            if not connection.in_atomic_block:
                self._committed()
            elif not any(callback == self._committed for _, callback, _ in connection.run_on_commit):
                connection.on_commit(self._committed)
        return execute(sql, params, many, context)

    def _committed(self):
        with self._lock:
            self.write_transactions += 1


def _flattened(params) -> list:
    """Statement parameters, with the arrays of a bulk insert (`UNNEST(%s)`) opened."""
    values = []
    for value in (params.values() if isinstance(params, dict) else params) or ():
        values.extend(value if isinstance(value, list | tuple) else [value])
    return values


def database_work_per_echo_run(stack: Stack, owner_ids: list[int], count: int, *, delta_delay_ms: int) -> dict:
    """Echo runs executed here, in this process, one at a time, each in a conversation whose session already
    exists (the common case: a later message of a chat); the first run of each conversation, which creates the
    session, is executed first and not counted. Wake-ups are purged: no worker competes for the runs.

    With no pause between the double's deltas the reply is whole by the first read of the turn; with a pause,
    each read of the live stream brings some of it, and each read is one transaction."""
    import resource

    from django.test import override_settings

    from impo.celery import app
    from runtime.execution import driver
    from runtime.models import Run, RunState

    stack.double.configure(delta_delay_ms=delta_delay_ms)
    statements, writes, before_delta, cpu_ms = [], [], [], []
    with override_settings(REBYTE_BASE_URL=stack.double.api_url):
        for round_ in ("warm", "measured"):
            run_ids = admit_runs(owner_ids[:count], count, f"dbwork-{round_}")
            app.control.purge()
            for run_id in run_ids:
                cpu = resource.getrusage(resource.RUSAGE_SELF)
                with DatabaseWork() as work:
                    driver.execute_run(run_id, "bench-in-process")
                used = resource.getrusage(resource.RUSAGE_SELF)
                if Run.objects.get(id=run_id).state != RunState.COMPLETED:
                    raise RuntimeError("an echo run did not complete: its counts would be meaningless")
                if round_ == "measured":
                    statements.append(work.statements)
                    writes.append(work.write_transactions)
                    before_delta.append(work.first_delta_after)
                    cpu_ms.append(1000 * (used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime))
    return {
        "statements": statistics.median(statements),
        "write_transactions": statistics.median(writes),
        "write_transactions_before_first_delta": statistics.median(before_delta),
        "cpu_ms": statistics.median(cpu_ms),
    }


def first_message_work(stack: Stack, count: int) -> dict:
    """The fixed work of a conversation's first message, executed here one at a time as `database_work_per_echo_run`
    does: each a new user's, so its agent and session are created (the session on its event stream) for a reply of
    one delta. The first few warm the process and are not counted."""
    import resource

    from django.test import override_settings

    from bench.harness import create_users
    from impo.celery import app
    from runtime.execution import driver
    from runtime.models import Run, RunState

    warm = 3
    stack.double.configure(delta_delay_ms=0, delta_chunks=1)
    owner_ids = [user_id for user_id, _ in create_users(warm + count, f"first-{uuid.uuid4().hex[:8]}")]
    cpu_ms, calls = [], []
    with override_settings(REBYTE_BASE_URL=stack.double.api_url):
        for index, run_id in enumerate(admit_runs(owner_ids, len(owner_ids), "first")):
            app.control.purge()
            requests = len(stack.double.requests())
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            driver.execute_run(run_id, "bench-in-process")
            used = resource.getrusage(resource.RUSAGE_SELF)
            if Run.objects.get(id=run_id).state != RunState.COMPLETED:
                raise RuntimeError("a first message did not complete: its figure would be meaningless")
            if index >= warm:
                cpu_ms.append(1000 * (used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime))
                calls.append(len(stack.double.requests()) - requests)
    stack.double.configure(delta_chunks=4)
    return {"cpu_ms": statistics.median(cpu_ms), "provider_calls": statistics.median(calls)}


def measure(stack: Stack, owner_ids: list[int], *, runs: int, claims: int) -> list[Figure]:
    stack.double.configure(delta_delay_ms=0)
    one = completed_runs_per_second(stack, owner_ids, workers=1, count=runs)
    two = completed_runs_per_second(stack, owner_ids, workers=2, count=runs)
    claim = claim_function_rate(owner_ids, claims)
    bare = bare_skip_locked_rate(claims)
    per_run = [
        (pacing, database_work_per_echo_run(stack, owner_ids, min(10, len(owner_ids)), delta_delay_ms=delay))
        for pacing, delay in (("reply whole at once", 0), ("reply streamed, 20 ms between deltas", 20))
    ]
    first = first_message_work(stack, min(20, len(owner_ids)))
    stack.double.configure(delta_delay_ms=0)
    return [
        Figure(f"echo runs completed, 1 worker, {len(owner_ids)} conversations", one, "runs/s"),
        Figure(
            f"echo runs completed, 2 workers, {len(owner_ids)} conversations",
            two,
            "runs/s",
            baseline_name="1 worker",
            baseline=one,
        ),
        Figure(
            "claim_run (lease + run.started event)",
            claim,
            "claims/s",
            baseline_name="bare SELECT … FOR UPDATE SKIP LOCKED + UPDATE",
            baseline=bare,
        ),
        *(
            Figure(
                f"one echo run (a later message of a chat, {pacing}), median",
                work["write_transactions"],
                "write transactions",
                notes=[
                    f"{work['statements']:.0f} statements; the first text.delta is inserted in write transaction "
                    f"{work['write_transactions_before_first_delta'] + 1:.0f} (the claim is the first)",
                    f"{work['cpu_ms']:.1f} ms CPU per run in the executing process (provider client included)",
                ],
            )
            for pacing, work in per_run
        ),
        Figure(
            "one echo run (a first message: the user's agent and session created, a reply of one delta), median",
            first["cpu_ms"],
            "ms CPU in the executing process",
            baseline_name="a later message of a chat, reply whole at once",
            baseline=per_run[0][1]["cpu_ms"],
            higher_is_better=False,
            notes=[f"{first['provider_calls']:.0f} provider calls (the session created on its event stream)"],
        ),
    ]
