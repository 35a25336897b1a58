"""PostgreSQL and Redis servers of the fault suite's own, on free ports, so they can be restarted and stopped
without touching the machine's services (or another test session's)."""

import shutil
import subprocess
import tempfile
from pathlib import Path

from devtools.stack import ServiceProcess, free_port, port_open, wait_until

PG_BIN = max(Path("/usr/lib/postgresql").glob("*/bin"))


class PrivatePostgres:
    """A throwaway cluster run by the `postgres` user (PostgreSQL refuses to run as root)."""

    def __init__(self):
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="impo-faults-pg-"))
        shutil.chown(self.directory, "postgres", "postgres")
        self.log = self.directory / "server.log"
        self._as_postgres(str(PG_BIN / "initdb"), "-D", str(self.directory / "data"), "-A", "trust", "-U", "postgres")
        self.start()

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True, timeout=120)

    def _pg_ctl(self, *argv: str) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(
            str(PG_BIN / "pg_ctl"), "-D", str(self.directory / "data"), "-o", options, "-l", str(self.log), "-w", *argv
        )

    def start(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        self._pg_ctl("stop", "-m", "fast")

    def create_database(self, name: str) -> None:
        self._as_postgres(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), name)

    def destroy(self) -> None:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.directory / "data"),
                "stop",
                "-m",
                "immediate",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.directory, ignore_errors=True)


class PrivateRedis:
    def __init__(self):
        self.port = free_port()
        self.process: ServiceProcess | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = ServiceProcess(
            "faults-redis",
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        )
        wait_until(lambda: port_open(self.port), timeout=20, what="the fault suite's Redis")

    def stop(self) -> None:
        self.process.kill()
        wait_until(lambda: not port_open(self.port), timeout=20, what="the fault suite's Redis to stop")
