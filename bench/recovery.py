"""Recovery: time from SIGKILL of the worker holding a run mid-stream to the run completing on another worker,
against the lease duration (the wait the design accepts before a run counts as abandoned).
"""

import time
import uuid
from pathlib import Path

from bench.harness import Figure, median_and_p95
from devtools.stack import ServiceProcess, Stack, wait_until


def _parent_pid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise RuntimeError(f"no parent for pid {pid}")


def _holder(workers: list[ServiceProcess], lease_owner: str) -> ServiceProcess:
    """The worker whose pool process holds the lease (lease owners read host:pid:nonce)."""
    pool_pid = int(lease_owner.split(":")[1])
    parent = _parent_pid(pool_pid)
    return next(worker for worker in workers if worker.process.pid in (pool_pid, parent))


def one_recovery(stack: Stack, workers: list[ServiceProcess], owner_id: int) -> float:
    from django.contrib.auth import get_user_model

    from runtime.models import Event, Run, RunState
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_main_chat_message

    owner = get_user_model().objects.get(id=owner_id)
    receipt = submit_main_chat_message(
        owner=owner, command=MessageCommand(client_message_id=f"recover-{uuid.uuid4()}", text="survive a crash")
    )
    run = Run.objects.get(submission_id=receipt.submission_id)
    wait_until(
        lambda: Event.objects.filter(submission_id=receipt.submission_id, type="text.delta").exists(),
        timeout=60,
        what="the run to be mid-stream",
    )
    run.refresh_from_db()
    holder = _holder(workers, run.lease_owner)
    holder.kill()
    killed_at = time.monotonic()
    workers.remove(holder)
    wait_until(
        lambda: Run.objects.filter(id=run.id, state=RunState.COMPLETED).exists(),
        timeout=300,
        interval=0.05,
        what="the run to complete after the kill",
    )
    recovered = time.monotonic() - killed_at
    workers.append(stack.start_worker("bench-worker-replacement"))
    return recovered


def measure(stack: Stack, owner_id: int, *, lease_seconds: float, sweep_seconds: float, samples: int) -> Figure:
    stack.env.update({"IMPO_RUN_LEASE_SECONDS": str(lease_seconds), "IMPO_SWEEP_INTERVAL_SECONDS": str(sweep_seconds)})
    # A turn of several seconds, so the kill lands while the reply is streaming.
    stack.double.configure(delta_delay_ms=700, delta_chunks=6)
    sweeper = stack.start_sweeper(sweep_seconds)
    workers = [stack.start_worker("bench-worker-a"), stack.start_worker("bench-worker-b")]
    try:
        durations = [one_recovery(stack, workers, owner_id) for _ in range(samples)]
    finally:
        sweeper.stop()
        for worker in workers:
            worker.stop()
        stack.double.configure(delta_delay_ms=0, delta_chunks=4)
    median, p95 = median_and_p95(durations)
    return Figure(
        f"SIGKILL → run completed elsewhere (median of {samples})",
        median,
        "s",
        baseline_name=f"lease duration (sweeper every {sweep_seconds:g} s)",
        baseline=lease_seconds,
        higher_is_better=False,
        notes=[f"max {max(durations):.2f} s, p95 {p95:.2f} s; turn streams 6 deltas 0.7 s apart"],
    )
