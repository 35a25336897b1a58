"""The chaos run's faults: for the whole window it kills worker processes and whole worker hosts, arms the Rebyte
double's fault knobs, redelivers Celery wake-ups and cuts client sockets; on a schedule spread over the window it
restarts the stack's own PostgreSQL and Redis and kills web processes. It also keeps the worker hosts (a killed
host is replaced) and the count of every fault, and when the last one was injected."""

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import kombu.exceptions

from devtools.stack import WorkerProcess
from tests.chaos.processes import child_pids, process_age_seconds, serving_worker_pids

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

# The chaos hosts' threshold for a crash loop (30 s in production): kills come faster than that here.
QUICK_EXIT_SECONDS = 5.0
# Faults that an operator would call a fault (not a client's own resend, cancel or reconnect), for "settled after
# the last fault".
CLIENT_ACTIONS = {"client_resend", "client_cancel", "client_reconnect"}

RECOVERY_FAULTS = [
    ("list_turns", "http_error", {"status": 503}),
    ("list_items", "http_error", {"status": 502}),
    ("session_events", "cut_stream", {"after_events": 0}),
    ("input_tool_result", "drop_response", {}),
]

PROVIDER_FAULTS = [
    ("create_agent", "drop_response", {}),
    ("create_session", "drop_response", {}),
    ("create_session", "http_error", {"status": 502}),
    # A streamed create lost before it names the session (an unknown outcome), and one cut mid-turn.
    ("create_session", "cut_stream", {"after_events": 0}),
    ("create_session", "cut_stream", {"after_events": 6}),
    ("input_message", "drop_response", {}),
    ("input_message", "http_error", {"status": 503}),
    ("input_message", "delay", {"delay_ms": 1500}),
    ("session_events", "delay", {"delay_ms": 1200}),
    ("session_events", "cut_stream", {"after_events": 1}),
    ("session_events", "cut_stream", {"after_events": 3}),
    ("list_turns", "http_error", {"status": 503}),
    ("list_items", "http_error", {"status": 500}),
    ("input_tool_result", "drop_response", {}),
    ("input_tool_result", "http_error", {"status": 503}),
]


class FaultInjector:
    def __init__(self, run: "ChaosRun"):
        self.run = run
        self.hosts: list[WorkerProcess] = []
        self.last_fault_at: float | None = None
        self._lock = threading.Lock()

    # --- bookkeeping -----------------------------------------------------------------------------

    def count(self, name: str) -> None:
        with self._lock:
            self.run.figures.faults[name] += 1
            if name not in CLIENT_ACTIONS:
                self.last_fault_at = time.monotonic()

    def start_hosts(self) -> None:
        self.hosts = [self._start_host(f"chaos-host-{n}") for n in range(self.run.config.workers)]

    def replace_dead_hosts(self) -> None:
        for host in [host for host in self.hosts if not host.alive]:
            self.hosts.remove(host)
            self.hosts.append(self._start_host("chaos-host-late"))

    def _start_host(self, name: str) -> WorkerProcess:
        return self.run.stack.start_worker(
            name,
            wait=False,
            host_processes=self.run.config.worker_processes,
            env={"IMPO_WORKER_QUICK_EXIT_SECONDS": str(QUICK_EXIT_SECONDS)},
        )

    # --- the loop --------------------------------------------------------------------------------

    def inject(self) -> None:
        from django.db import connection

        try:
            self._inject_until_done()
        finally:
            connection.close()  # this thread's own connection would keep the test database from dropping

    def _outage_schedule(self, rng: random.Random) -> list[tuple[float, Callable]]:
        """When the heavy faults come: each kind spread over the window (one a slice of it, jittered), so a run of
        any length has some of each and never two restarts of one service at once."""
        seconds = self.run.config.seconds
        kinds = [
            (self._restart_postgres, max(1, int(seconds // 50))),
            (self._restart_redis, max(1, int(seconds // 50))),
            (self._kill_web_process, max(1, int(seconds // 30))),
            (self._kill_worker_host, max(1, int(seconds // 40))),
        ]
        schedule = []
        for inject, count in kinds:
            slice_seconds = seconds / count
            schedule += [(slice_seconds * (n + rng.uniform(0.15, 0.85)), inject) for n in range(count)]
        return sorted(schedule, key=lambda entry: entry[0])

    def _inject_until_done(self) -> None:
        rng = random.Random(self.run.rng.random())
        outages = self._outage_schedule(rng)
        opened = self.run.deadline - self.run.config.seconds
        kinds = [
            (self._kill_worker_process, 1),
            (self._provider_fault, 8),
            (self._duplicate_delivery, 3),
            (self._reconnect_client, 3),
            (self._compound_faults, 1),
            (self._fault_during_recovery, 1),
        ]
        # Every run kills a worker host mid-flight first; the rest is drawn by weight, the outages on schedule.
        inject = self._kill_worker_host
        while time.monotonic() < self.run.deadline:
            time.sleep(rng.uniform(0.3, 1.2))  # pacing the injection, not waiting for a condition
            while outages and time.monotonic() - opened >= outages[0][0]:
                outages.pop(0)[1](rng)
            inject(rng)
            inject = rng.choices([kind for kind, _ in kinds], weights=[weight for _, weight in kinds])[0]

    # --- processes -------------------------------------------------------------------------------

    def _serving(self) -> dict[WorkerProcess, list[int]]:
        """Each live host's worker processes that serve (booted on a loaded machine one may take 40 s: killed
        before, nothing would run) and have served a while: the host takes a process dying younger than
        QUICK_EXIT_SECONDS for a crash loop and waits before the next start (up to 30 s), which the run would then
        measure as a stall of its own making."""
        serving = {}
        for host in self.hosts:
            serving[host] = []
            for pid in serving_worker_pids(host) if host.alive else []:
                try:
                    if process_age_seconds(pid) >= QUICK_EXIT_SECONDS:
                        serving[host].append(pid)
                except (FileNotFoundError, ProcessLookupError):
                    continue  # exited meanwhile
        return serving

    # Neither kill takes the last serving worker process: with none left, nothing runs until a replacement boots
    # (half a minute on a loaded machine), a stall the run would have made itself.

    def _kill_worker_process(self, rng: random.Random) -> None:
        """SIGKILLs one worker process of a host: the host starts another (impo/worker_host.py)."""
        serving = [pid for pids in self._serving().values() for pid in pids]
        if len(serving) > 1 and _kill(rng.choice(serving)):
            self.count("worker_process_sigkill")

    def _kill_worker_host(self, rng: random.Random) -> None:
        """SIGKILLs a whole worker host with its processes, as a machine lost; another host starts."""
        serving = self._serving()
        victims = [host for host in self.hosts if any(pids for other, pids in serving.items() if other is not host)]
        if not victims:
            return
        victim = rng.choice(victims)
        victim.kill()
        self.count("worker_host_sigkill")
        self.hosts.remove(victim)
        self.hosts.append(self._start_host(f"chaos-host-r{self.run.figures.faults['worker_host_sigkill']}"))

    def _kill_web_process(self, rng: random.Random) -> None:
        """SIGKILLs one web process: its sockets and requests are lost, gunicorn starts another."""
        pids = child_pids(self.run.services.web.process.pid)
        if pids and _kill(rng.choice(pids)):
            self.count("web_sigkill")

    def _restart_redis(self, rng: random.Random) -> None:
        self.run.services.redis.stop()
        self.count("redis_restart")
        time.sleep(rng.uniform(1.0, 5.0))  # the outage's length, not waiting for a condition
        self.run.services.redis.start()

    def _restart_postgres(self, rng: random.Random) -> None:
        self.run.services.postgres.stop()
        self.count("postgres_restart")
        time.sleep(rng.uniform(1.0, 3.0))  # the outage's length, not waiting for a condition
        self.run.services.postgres.start()

    # --- the provider, the broker, the clients ---------------------------------------------------

    def _compound_faults(self, rng: random.Random) -> None:
        """Several faults at once: a dead worker, provider failures and a redelivered wake-up together."""
        for inject in rng.sample(
            [self._kill_worker_process, self._provider_fault, self._provider_fault, self._duplicate_delivery], k=3
        ):
            inject(rng)
        self.count("compound")

    def _fault_during_recovery(self, rng: random.Random) -> None:
        """Kills a worker process and arms faults its successor meets while it resumes the run."""
        self._kill_worker_process(rng)
        for op, mode, options in rng.sample(RECOVERY_FAULTS, k=2):
            self.run.stack.double.fault(op, mode, times=rng.randint(1, 3), **options)
            self.count(f"recovery:{op}:{mode}")

    def _provider_fault(self, rng: random.Random) -> None:
        op, mode, options = rng.choice(PROVIDER_FAULTS)
        self.run.stack.double.fault(op, mode, times=rng.randint(1, 2), **options)
        self.count(f"{op}:{mode}")

    def _duplicate_delivery(self, rng: random.Random) -> None:
        from django.db import DatabaseError, connection

        from impo.celery import app
        from runtime.models import Run

        try:
            candidates = list(
                Run.objects.filter(submission_id__in=self.run.submission_ids()).values_list("id", flat=True)
            )
        except DatabaseError:
            connection.close()
            return  # PostgreSQL restarting: nothing to redeliver now
        if not candidates:
            return
        run_id = rng.choice(candidates)
        try:
            with app.connection_for_write(url=self.run.stack.env["REDIS_URL"]) as broker:
                for _ in range(rng.randint(1, 3)):
                    app.send_task("runtime.execute_run", args=[str(run_id)], connection=broker)
                    self.count("duplicate_delivery")
        except (OSError, kombu.exceptions.OperationalError):
            return  # Redis restarting

    def _reconnect_client(self, rng: random.Random) -> None:
        watchers = list(self.run.watchers.values())
        if watchers:
            rng.choice(watchers).request_reconnect()
            self.count("client_reconnect")


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False  # exited meanwhile
    return True
