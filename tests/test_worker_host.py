"""The worker host as `make run` starts it: one Celery worker process per slot under a supervisor that starts a
dead one again, stops them all on SIGTERM, and takes them with it when it is killed."""

import contextlib
import os
import signal
import uuid
from pathlib import Path

from devtools.stack import wait_until
from impo import worker_liveness
from runtime.models import RunState
from runtime.services.admission import MessageCommand
from runtime.services.commands import create_task
from tests.client import finished_run


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            if parent == pid:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def a_message_completes(user) -> None:
    text = f"through the host {uuid.uuid4().hex[:6]}"
    receipt = create_task(owner=user, command=MessageCommand(client_message_id=str(uuid.uuid4()), text=text))
    run = finished_run(receipt.submission_id, timeout=90)
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == f"Echo: {text}"


def test_the_host_runs_its_worker_processes_and_starts_a_dead_one_again(stack, user):
    host = stack.start_worker("host", host_processes=2)
    first = children_of(host.process.pid)
    assert len(first) == 2
    wait_until(lambda: worker_liveness.alive_count() == 2, timeout=30, what="both workers' heartbeats")
    a_message_completes(user)

    victim = sorted(first)[0]
    os.kill(victim, signal.SIGKILL)

    replaced = wait_until(
        lambda: len(now := children_of(host.process.pid)) == 2 and victim not in now and now,
        timeout=30,
        what="a new worker process in the killed one's place",
    )
    assert replaced & first == first - {victim}  # the other worker went on untouched
    wait_until(lambda: host.log_text().count(" ready.") == 3, timeout=60, what="the new worker to be ready")
    a_message_completes(user)
    assert host.alive


def test_sigterm_stops_every_worker_and_then_the_host(stack):
    host = stack.start_worker("host", host_processes=2)
    children = children_of(host.process.pid)

    host.process.send_signal(signal.SIGTERM)  # the supervisor alone, as a process manager stops it

    assert host.process.wait(timeout=60) == 0
    assert not any(alive(pid) for pid in children)
    assert host.log_text().count("Warm shutdown") == 2


def test_a_killed_host_takes_its_workers_with_it(stack):
    host = stack.start_worker("host", host_processes=2)
    children = children_of(host.process.pid)

    os.kill(host.process.pid, signal.SIGKILL)  # the supervisor alone, not its process group

    try:
        wait_until(lambda: not any(alive(pid) for pid in children), timeout=30, what="the workers to die with it")
    finally:
        with contextlib.suppress(ProcessLookupError):  # what outlived it, had it failed to go
            os.killpg(host.process.pid, signal.SIGKILL)
