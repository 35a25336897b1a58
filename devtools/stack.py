"""The stack's real processes as the tests and the benchmarks start them: the Rebyte double, Celery workers (or the
worker host), the sweeper, the webhooks loop and the web server, each on free loopback ports, waited for, always
stopped (Temporal's dev server: devtools/temporal.py).

It lives in the roof because it composes every app's processes, as `make run` (the Procfile) does; the tests and
bench/ both import it from here, so neither imports the other."""

import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from devtools.push_service import new_vapid_private_key

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = Path(os.environ.get("IMPO_TEST_LOG_DIR", tempfile.gettempdir())) / "impo-test-logs"
VENV_BIN = Path(sys.executable).parent
# How long a started process may take to serve: a deadline for a broken start, not a wait (readiness is polled).
STARTUP_SECONDS = 150


def _server_ports() -> range:
    """Ports below the kernel's ephemeral range. A port the kernel hands out as free (bind to 0) comes from that range,
    where any outgoing connection may take it as its source port before the server started on it binds it (a dev
    Temporal failed on "address already in use" so); below it only another server of ours can take it."""
    lowest_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return range(max(1024, lowest_ephemeral - 12_000), lowest_ephemeral)


_SERVER_PORTS = _server_ports()
_port_choice = random.Random(os.getpid() ^ time.monotonic_ns())  # each test session draws its own sequence


def free_port() -> int:
    """A loopback port nothing listens on now, for a server about to be started."""
    while True:
        port = _port_choice.choice(_SERVER_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def wait_until(condition: Callable[[], object], *, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Polls until `condition()` is truthy and returns its value; fails loudly at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def settings_database_url(name: str | None = None) -> str:
    """The URL of the database the test settings point at (this process's connection, `name` instead of its
    database if given): every process a test starts uses the server the test itself reads."""
    from django.db import connection

    database = connection.settings_dict
    credentials = quote(database["USER"] or "", safe="")
    if database["PASSWORD"]:
        credentials += ":" + quote(database["PASSWORD"], safe="")
    location = (database["HOST"] or "") + (f":{database['PORT']}" if database["PORT"] else "")
    return f"postgres://{credentials}@{location}/{name or database['NAME']}"


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ServiceProcess:
    """One child process with its output in a log file, in its own process group."""

    def __init__(self, name: str, argv: list[str], *, env: dict | None = None):
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = LOG_DIR / f"{name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole group: no cleanup, exactly like a machine losing the worker."""
        if self.alive:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self._log.close()

    def stop(self, timeout: float = 10) -> None:
        self.terminate()
        self.finish(time.monotonic() + timeout)

    def terminate(self) -> None:
        """Asks the group to shut down (SIGTERM); `finish` waits for it."""
        if self.alive:
            os.killpg(self.process.pid, signal.SIGTERM)

    def finish(self, deadline: float) -> None:
        """Waits until `deadline` (monotonic) for a terminated process to exit, then kills it."""
        try:
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
        self._log.close()


class WorkerProcess(ServiceProcess):
    """A Celery worker, or a worker host supervising `processes` of them (all in its process group)."""

    def __init__(self, name: str, argv: list[str], *, env: dict, processes: int):
        super().__init__(name, argv, env=env)
        self.processes = processes


class RebyteDouble(ServiceProcess):
    """A `python -m rebyte.double` child process and its unauthenticated admin knobs."""

    def __init__(self, *extra_args: str):
        import httpx

        port = free_port()
        self._argv = [sys.executable, "-m", "rebyte.double", "--port", str(port), *extra_args]
        super().__init__("rebyte-double", self._argv)
        self.url = f"http://127.0.0.1:{port}"
        self.api_url = f"{self.url}/v1"
        self.admin = httpx.Client(base_url=self.url, timeout=5)
        wait_until(self._healthy, timeout=15, what=f"the Rebyte double (log: {self.log_path})")

    def restart(self) -> None:
        """Stops the double and starts a new one on the same port: every agent and session it held is forgotten,
        as the real service can lose them (deleted in its console, another organisation's key)."""
        ServiceProcess.stop(self)
        ServiceProcess.__init__(self, "rebyte-double", self._argv)
        wait_until(self._healthy, timeout=15, what=f"the restarted Rebyte double (log: {self.log_path})")

    def _healthy(self) -> bool:
        import httpx

        if not self.alive:
            raise RuntimeError(f"the Rebyte double exited; see {self.log_path}")
        try:
            return self.admin.get("/_double/health").status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, timeout: float = 10) -> None:
        self.admin.close()
        super().stop(timeout)

    def gateway(self, **kwargs):
        from rebyte.client import RebyteGateway

        return RebyteGateway(self.api_url, kwargs.pop("api_key", "test-key"), timeout=5, stream_timeout=30, **kwargs)

    def sdk(self, **kwargs):
        """The official SDK with strict response validation: every answer must parse into its models."""
        import openai

        return openai.OpenAI(
            base_url=self.api_url, api_key="test-key", max_retries=0, _strict_response_validation=True, **kwargs
        )

    def requests(self) -> list[dict]:
        return self.admin.get("/_double/requests").raise_for_status().json()["requests"]

    def reset(self) -> None:
        self.admin.post("/_double/reset").raise_for_status()

    def fault(self, op: str, mode: str, **options) -> None:
        self.admin.post("/_double/faults", json={"op": op, "mode": mode, **options}).raise_for_status()

    def end_faults(self) -> None:
        self.admin.delete("/_double/faults").raise_for_status()

    def configure(self, **knobs) -> None:
        self.admin.post("/_double/config", json=knobs).raise_for_status()

    def state(self) -> dict:
        return self.admin.get("/_double/state").raise_for_status().json()


class Stack:
    """Worker and sweeper processes wired to the test database, the test Redis and a Rebyte double."""

    LEASE_SECONDS = 3
    PROVIDER_BACKOFF_CAP_SECONDS = 4

    def __init__(self, *, database_name: str, double: RebyteDouble, redis_url: str, database_url: str | None = None):
        self.double = double
        self.env = {
            "DATABASE_URL": database_url or settings_database_url(database_name),
            "REDIS_URL": redis_url,
            "IMPO_RUNTIME": "echo",
            "REBYTE_BASE_URL": double.api_url,
            "IMPO_RUN_LEASE_SECONDS": str(self.LEASE_SECONDS),
            "IMPO_REWAKE_AFTER_SECONDS": "1",
            "IMPO_SWEEP_INTERVAL_SECONDS": "0.3",
            # Shorter than production's so recovery tests finish quickly; the logic is the same.
            "IMPO_REBYTE_LISTING_GRACE_SECONDS": "1",
            "IMPO_PROVIDER_BACKOFF_CAP_SECONDS": str(self.PROVIDER_BACKOFF_CAP_SECONDS),
            "IMPO_TURN_APPEAR_SECONDS": "3",
            "IMPO_WEBHOOK_BACKOFF_BASE_SECONDS": "0.5",
            "IMPO_WEBHOOK_BACKOFF_CAP_SECONDS": "4",
            "IMPO_WEBHOOK_TIMEOUT_SECONDS": "3",
            "IMPO_WEBHOOK_REWAKE_AFTER_SECONDS": "2",
            # The webhook tests' receivers listen on loopback over plain http: allowed explicitly, as a deployment
            # with a receiver on its own machine would (docs/operations.md "Security").
            "IMPO_WEBHOOK_ALLOW_HTTP": "true",
            "IMPO_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
            # Web Push: a VAPID key of the stack's own (devtools/push_service.py checks pushes against it).
            "IMPO_VAPID_PRIVATE_KEY": new_vapid_private_key(),
            # Served like a deployment (no DEBUG pages, a key of its own), but over plain HTTP on loopback.
            "DJANGO_DEBUG": "false",
            "DJANGO_HTTPS": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            # The harness drives a few users far harder than a person would (the fuzzer, the chaos run, the
            # benchmarks); the tests of these limits lower them again.
            "IMPO_LIMIT_ADMISSIONS_PER_MINUTE": "1000000",
            "IMPO_LIMIT_ACTIVE_RUNS": "1000000",
            # Every client of a test connects from loopback: one address for thousands of sockets.
            "IMPO_WEB_CONNECTIONS_PER_ADDRESS": "1000000",
            # PostgreSQL's connections are shared by every test session on the machine (several run in parallel
            # under xdist): a test's web processes pool few, which the streams test shows is enough.
            "DATABASE_POOL_MAX_SIZE": "5",
        }
        self.processes: list[ServiceProcess] = []

    def start_worker(
        self,
        name: str = "worker",
        *,
        queue: str | None = None,
        env: dict | None = None,
        wait: bool = True,
        host_processes: int | None = None,
    ) -> "WorkerProcess":
        """A Celery worker as shipped (the threads pool, IMPO_WORKER_CONCURRENCY runs at once, pooled database
        connections); `queue` (its heartbeat's too) instead of the stack's, as on another machine; `env` on top of
        the stack's. `wait=False` returns while it boots (`wait_ready` then), so it boots beside others.
        `host_processes`: the worker host as `make run` starts it (impo/worker_host.py), with that many worker
        processes, instead of one worker process."""
        env = {**self.env, **(env or {}), **({"CELERY_QUEUE": queue} if queue else {})}
        options = ["-n", f"{name}-{free_port()}@%h", "--without-mingle", "--without-gossip"]
        options += [*(["-Q", queue] if queue else []), "-l", "info"]
        if host_processes is None:
            argv = [str(VENV_BIN / "celery"), "-A", "impo", "worker", *options]
        else:
            argv = [sys.executable, "-m", "impo.worker_host", *options]
            env["IMPO_WORKER_PROCESSES"] = str(host_processes)
        worker = WorkerProcess(name, argv, env=env, processes=host_processes or 1)
        self.processes.append(worker)
        if wait:
            self.wait_ready(worker)
        return worker

    def wait_ready(self, worker: "WorkerProcess") -> None:
        # Generous: on a loaded 2-core machine a worker's imports alone have taken over a minute.
        what = f"celery {worker.name} (log: {worker.log_path})"
        wait_until(lambda: self._ready(worker), timeout=STARTUP_SECONDS, what=what)

    def start_sweeper(self, interval: float = 0.3) -> ServiceProcess:
        sweeper = ServiceProcess(
            "sweeper", [sys.executable, "manage.py", "run_sweeper", "--interval", str(interval)], env=self.env
        )
        self.processes.append(sweeper)
        return sweeper

    def start_webhooks(self, interval: float = 0.3) -> ServiceProcess:
        """The webhooks loop: collects deliveries from the event log and re-wakes lost ones."""
        loop = ServiceProcess(
            "webhooks", [sys.executable, "manage.py", "run_webhooks", "--interval", str(interval)], env=self.env
        )
        self.processes.append(loop)
        return loop

    @staticmethod
    def _ready(worker: "WorkerProcess") -> bool:
        if not worker.alive:
            raise RuntimeError(f"{worker.name} exited:\n{worker.log_text()[-3000:]}")
        return worker.log_text().count(" ready.") >= worker.processes

    def stop(self) -> None:
        """A cold stop: SIGKILL to every process, no drain. Runs are built to survive exactly that, and a graceful
        shutdown of a worker waits for its runs; the tests of shutdown stop their process themselves."""
        for process in self.processes:
            process.kill()
        self.processes.clear()


# `make run` serves with two processes (impo/web_server.py); a test's own server needs one unless it tests what
# crosses processes, and every process boots Django (seconds of CPU that the tests' shared cores pay).
MAKE_RUN_WEB_PROCESSES = 2


def start_web(
    stack: "Stack",
    application: str = "impo.asgi:application",
    *,
    processes: int = 1,
    name: str = "web",
    env: dict | None = None,
) -> tuple[ServiceProcess, str]:
    """The server `make run` uses (gunicorn with uvicorn worker processes on one port) serving an ASGI app (Impo's
    HTTP + websockets by default) with the stack's environment (and `env`); returns once every process serves."""
    port = free_port()
    web = ServiceProcess(
        name,
        [str(VENV_BIN / "gunicorn"), "-c", "python:impo.web_server", application],
        # As the Procfile runs it: glibc's malloc arenas capped (docs/operations.md "Processes").
        env={
            "MALLOC_ARENA_MAX": "2",
            **stack.env,
            **(env or {}),
            "IMPO_WEB_PORT": str(port),
            "IMPO_WEB_PROCESSES": str(processes),
        },
    )
    stack.processes.append(web)

    def serving() -> bool:
        if not web.alive:
            raise RuntimeError(f"{name} exited:\n{web.log_text()[-3000:]}")
        return web.log_text().count("Started server process") >= processes

    wait_until(serving, timeout=STARTUP_SECONDS, what=f"{name} (log: {web.log_path})")
    return web, f"http://127.0.0.1:{port}"


def long_task_conversation(owner, messages: int, text: str):
    """A task whose conversation has `messages` settled messages after its first exchange, written in bulk as years of
    use would leave them (setup for the export's tests and bench, not a product write path); returns its id."""
    # Imported here: this module is loaded before Django is set up, to start the processes.
    from runtime.models import Message, MessageRole, MessageStatus
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import open_task

    receipt = open_task(owner=owner, command=MessageCommand(client_message_id="long-task", text="a long one"))
    conversation_id = Message.objects.get(id=receipt.user_message_id).conversation_id
    Message.objects.bulk_create(
        (
            Message(
                conversation_id=conversation_id,
                sequence=10 + index,
                role=MessageRole.USER if index % 2 == 0 else MessageRole.ASSISTANT,
                text=text,
                status=MessageStatus.COMPLETED,
            )
            for index in range(messages)
        ),
        batch_size=2000,
    )
    return conversation_id
