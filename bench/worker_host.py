"""The worker host the in-flight figures measure: one worker process as the Procfile ships it."""

from tests.processes import ServiceProcess, Stack

HOST = "impo-inflight-host"  # its PGAPPNAME: the connections it holds are counted by this name
LEASE_SECONDS = 10


def start_host(stack: Stack) -> ServiceProcess:
    """A worker as shipped, but for its lease: the stack's 3 s (for quick recovery tests) would have hundreds of
    leases hang on one heartbeat statement a second on a machine this loaded; production's is 30 s."""
    return stack.start_worker(
        "inflight-host", env={"PGAPPNAME": HOST, "LOG_LEVEL": "WARNING", "IMPO_RUN_LEASE_SECONDS": str(LEASE_SECONDS)}
    )
