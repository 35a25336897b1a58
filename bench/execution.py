"""Execution: echo runs claimed and completed per second by 1 and 2 workers, and the claim itself against a bare
`SELECT … FOR UPDATE SKIP LOCKED` loop doing the same lease write on a plain table.
"""

import time
import uuid

from bench.harness import Figure, retire_unfinished_runs
from tests.processes import Stack, wait_until


def admit_runs(owner_ids: list[int], count: int, label: str, *, one_conversation_each: bool = False) -> list[uuid.UUID]:
    """`count` accepted messages spread over the owners' Main Chats, or each a Task in a conversation of its own
    (so each run is its conversation's only writer); returns their run ids."""
    from django.contrib.auth import get_user_model

    from runtime.models import Run
    from runtime.services import MessageCommand, create_task, submit_main_chat_message

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
    from runtime.services import claim_run

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


def measure(stack: Stack, owner_ids: list[int], *, runs: int, claims: int) -> list[Figure]:
    stack.double.configure(delta_delay_ms=0)
    one = completed_runs_per_second(stack, owner_ids, workers=1, count=runs)
    two = completed_runs_per_second(stack, owner_ids, workers=2, count=runs)
    claim = claim_function_rate(owner_ids, claims)
    bare = bare_skip_locked_rate(claims)
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
    ]
