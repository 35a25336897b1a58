"""`make run`'s Temporal: the dev server and the scheduling worker (`manage.py temporal_worker`) as one Procfile
entry, started and stopped in order.

`python -m devtools.run_temporal [temporal server start-dev options]` serves on TEMPORAL_ADDRESS. honcho stops every
entry at once (SIGTERM to each process group): as two entries, the dev server went away while its worker was still
polling and shutting down, and the worker logged its failed polls and shutdown call (warnings, at times an ERROR);
started together, the worker warned that Temporal was not reachable yet. Here the worker starts once the server
listens and stops before the server does. Both run in process groups of their own (so a signal to this one reaches
them only through it) and die with it if it is killed, as the worker host's workers do (impo/worker_host.py).

Not for a deployment: there Temporal is a service of its own and `manage.py temporal_worker` runs alone.
"""

import os
import signal
import subprocess
import sys
import threading

from devtools.stack import REPO_ROOT, VENV_BIN, port_open, wait_until
from impo.worker_host import die_with_the_supervisor

# One partition per task queue, not four: one worker needs no more, and the server creates each partition at the
# first poll that reaches it; a worker stopped while that is under way leaves an ERROR ("context canceled").
ONE_PARTITION = [
    *("--dynamic-config-value", "matching.numTaskqueueReadPartitions=1"),
    *("--dynamic-config-value", "matching.numTaskqueueWritePartitions=1"),
]
SERVER_START_SECONDS = 60
STOP_SECONDS = 20


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, process_group=0, preexec_fn=die_with_the_supervisor(os.getpid()))


def _stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def main() -> int:
    host, _, port = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233").rpartition(":")
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    server = _start(
        [str(VENV_BIN / "temporal"), "server", "start-dev", "--ip", host, "--port", port, *ONE_PARTITION, *sys.argv[1:]]
    )
    worker = None
    try:
        wait_until(
            lambda: stopping.is_set() or server.poll() is not None or port_open(int(port)),
            timeout=SERVER_START_SECONDS,
            interval=0.2,
            what="the Temporal dev server",
        )
        if not stopping.is_set() and server.poll() is None:
            worker = _start([sys.executable, str(REPO_ROOT / "manage.py"), "temporal_worker"])
            while not stopping.wait(0.5) and server.poll() is None and worker.poll() is None:
                pass
    finally:
        worker_code = _stop(worker) if worker is not None else 0
        server_code = _stop(server)
    return worker_code or server_code


if __name__ == "__main__":
    sys.exit(main())
