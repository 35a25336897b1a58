"""What the fault injector reads of the stack's processes, from /proc and their logs."""

import os
import re
from pathlib import Path

from devtools.stack import WorkerProcess


def process_age_seconds(pid: int) -> float:
    """How long the process has run (from /proc: its start in clock ticks after boot)."""
    started_ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")


_SLOT_STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")
_SLOT_READY = re.compile(r"\.(\d+)@\S+ ready\.")


def serving_worker_pids(host: WorkerProcess) -> list[int]:
    """The worker processes of a host that said they are ready since they started (from the host's log, which
    has the host's "worker N started (pid P)" and then worker N's Celery "<name>.N@<machine> ready.")."""
    started, ready = {}, set()
    for line in host.log_text().splitlines():
        if match := _SLOT_STARTED.search(line):
            started[match.group(1)] = int(match.group(2))
            ready.discard(match.group(1))
        elif match := _SLOT_READY.search(line):
            ready.add(match.group(1))
    alive = set(child_pids(host.process.pid))
    return [pid for slot, pid in started.items() if slot in ready and pid in alive]


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started (a worker host's workers, gunicorn's web processes)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []
