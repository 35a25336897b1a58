"""The stack's processes started and stopped as `make run` does (honcho sends SIGTERM to each process group when
Ctrl-C stops it) write each start-up warning once and stop with no ERROR, no warning and no traceback.

Before: each web process wrote "Error while closing socket [Errno 9] Bad file descriptor" as it stopped and Django's
StreamingHttpResponse warning at its first static file; each worker process Celery's warning about running as
root; and the Temporal dev server, stopped beside its worker, its poll warnings, the worker its failed polls."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from devtools.stack import VENV_BIN, ServiceProcess, free_port, start_web, wait_until

# A line a clean stop must not have: an error, a warning (Python's, Celery's, Temporal's), a traceback.
TROUBLE = re.compile(r"ERROR|CRITICAL|WARN|Traceback|Bad file descriptor|Warning:")
CELERY_ROOT_WARNING = "You're running the worker with superuser privileges"


def stopped_like_honcho(process: ServiceProcess, timeout: float = 60) -> int:
    process.stop(timeout=timeout)
    return process.process.returncode


def trouble(text: str, *allowed: str) -> list[str]:
    return [line for line in text.splitlines() if TROUBLE.search(line) and not any(a in line for a in allowed)]


def test_the_web_server_serves_a_static_file_and_stops_without_a_warning(stack):
    web, url = start_web(stack)
    for _ in range(4):  # both web processes, likely
        response = httpx.get(f"{url}/static/runtime/ui.js", timeout=30)
        assert response.status_code == 200 and response.content

    assert stopped_like_honcho(web) == 0
    log = web.log_text()
    assert "Shutting down: Master" in log
    assert trouble(log) == []


def test_a_worker_host_warns_once_and_stops_without_an_error(stack):
    host = stack.start_worker("host", host_processes=2)

    assert stopped_like_honcho(host) == 0
    log = host.log_text()
    assert log.count(CELERY_ROOT_WARNING) <= 1
    # Celery's warning spans lines; what is left of it is its text, not trouble.
    assert trouble(log, CELERY_ROOT_WARNING, "SecurityWarning") == []


def start_dev_temporal(stack) -> ServiceProcess:
    """`make run`'s Temporal line, on free ports, once its worker polls both of its task queue's types."""
    address = f"127.0.0.1:{free_port()}"
    ports = [option for name in ("--ui-port", "--http-port", "--metrics-port") for option in (name, str(free_port()))]
    temporal = ServiceProcess(
        "dev-temporal",
        [sys.executable, "-m", "devtools.run_temporal", "--headless", *ports, "--log-level", "error"],
        env={**stack.env, "TEMPORAL_ADDRESS": address},
    )
    stack.processes.append(temporal)
    wait_until(lambda: polled(address), timeout=120, what=f"the dev Temporal's worker (log: {temporal.log_path})")
    return temporal


def polled(address: str) -> bool:
    """Whether the worker's polls of workflow and activity tasks have reached the server (a stop before that is the
    server's race with its own start, not this test's subject)."""
    described = subprocess.run(
        [str(VENV_BIN / "temporal"), "task-queue", "describe", "--task-queue", "impo-scheduling"]
        + ["--address", address, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if described.returncode != 0:
        return False
    pollers = json.loads(described.stdout).get("pollers") or []
    return {"workflow", "activity"} <= {poller["taskQueueType"] for poller in pollers}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_dev_temporal_stops_its_worker_then_its_server_without_a_warning(stack, sig):
    """honcho sends SIGTERM to the process group; a terminal's Ctrl-C sends SIGINT to one run by hand."""
    temporal = start_dev_temporal(stack)

    os.killpg(temporal.process.pid, sig)
    temporal.finish(time.monotonic() + 60)
    assert temporal.process.returncode == 0
    assert "Beginning worker shutdown" in temporal.log_text()
    assert trouble(temporal.log_text()) == []


@pytest.mark.parametrize("loop", ["sweeper", "webhooks"])
def test_a_loop_stops_between_passes_with_status_zero(stack, loop):
    """A stop (a deployment's SIGTERM, honcho's) lets the pass under way finish and ends the loop, said in its log;
    before, the signal killed it wherever it was."""
    process = stack.start_sweeper() if loop == "sweeper" else stack.start_webhooks()
    wait_until(lambda: "loop started" in process.log_text(), timeout=60, what=f"the {loop} to start")

    assert stopped_like_honcho(process) == 0
    assert "loop stopped" in process.log_text()
    assert trouble(process.log_text()) == []
