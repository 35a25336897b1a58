"""The worker host the in-flight figures measure: as the Procfile ships it, one worker process per core."""

import os

from devtools.stack import Stack, WorkerProcess

HOST = "impo-inflight-host"  # its PGAPPNAME: the connections its processes hold are counted by this name
LEASE_SECONDS = 10


def start_host(stack: Stack, env: dict | None = None) -> WorkerProcess:
    """A worker host as shipped, but for its lease: the stack's 3 s (for quick recovery tests) would have hundreds
    of leases hang on one heartbeat statement a second on a machine this loaded; production's is 30 s. `env`: other
    settings on top (a figure beside its same-run comparison)."""
    return stack.start_worker(
        "inflight-host",
        env={"PGAPPNAME": HOST, "LOG_LEVEL": "WARNING", "IMPO_RUN_LEASE_SECONDS": str(LEASE_SECONDS), **(env or {})},
        host_processes=len(os.sched_getaffinity(0)),
    )
