"""The worker host: `IMPO_WORKER_PROCESSES` Celery worker processes under one supervisor.

`python -m impo.worker_host [celery worker options]` is what `make run` and the Procfile start. A worker process
drives hundreds of runs on its threads but uses at most one core (the interpreter's lock), so a host runs one
per core, as the web server does (impo/web_server.py). Each process has its own database pool, heartbeat and
group commit; a wake-up goes to whichever takes it from the broker first. The supervisor only starts them,
forwards a shutdown to them, and starts again one that exits while the host is not stopping (its runs' leases
lapse and are claimed anew: nothing is lost with a process). It imports no Django: it holds no connection and
no run. If it is killed, its workers die with it (the kernel's parent-death signal), so a host killed is a host
gone, never orphaned workers running under no supervisor.
"""

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

logger = logging.getLogger("impo.worker_host")

# A worker that exits within this long of its start is failing to start (a broken setting, the broker refusing):
# it is started again after a delay that doubles up to the cap, instead of at once in a tight loop.
QUICK_EXIT_SECONDS = float(os.environ.get("IMPO_WORKER_QUICK_EXIT_SECONDS", "30"))
RESTART_DELAY_CAP_SECONDS = 30.0
POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1


def worker_processes() -> int:
    configured = os.environ.get("IMPO_WORKER_PROCESSES", "").strip()
    if configured:
        count = int(configured)
        if count < 1:
            raise SystemExit("IMPO_WORKER_PROCESSES must be at least 1")
        return count
    return len(os.sched_getaffinity(0))


def split_node_name(celery_options: list[str]) -> tuple[str, list[str]]:
    """The `-n/--hostname` among the options (each worker gets it with its slot's number), and the rest."""
    name = f"worker-{os.getpid()}@%h"
    rest = []
    options = iter(celery_options)
    for option in options:
        if option in ("-n", "--hostname"):
            name = next(options)
        elif option.startswith("--hostname="):
            name = option.split("=", 1)[1]
        else:
            rest.append(option)
    return name, rest


def slot_node_name(name: str, slot: int) -> str:
    local, at, domain = name.partition("@")
    return f"{local}.{slot}{at}{domain}"


def die_with_the_supervisor(supervisor_pid: int):
    """A `preexec_fn` for a child that must not outlive `supervisor_pid` (the kernel's parent-death signal)."""

    def set_parent_death_signal() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The supervisor may have died between the fork and the call: then no signal will ever come.
        if os.getppid() != supervisor_pid:
            os._exit(1)

    return set_parent_death_signal


# Celery warns in every worker process that runs as root; the host's processes share one user, so the warning is
# kept in the first only (a `-W` filter by the message's opening words: the category's module is not importable
# when Python reads its warning options).
ROOT_WARNING_FILTER = "ignore:You're running the worker with superuser privileges"


def _slot_environment(number: int) -> dict[str, str] | None:
    if number == 0:
        return None
    configured = os.environ.get("PYTHONWARNINGS")
    return {
        **os.environ,
        "PYTHONWARNINGS": f"{configured},{ROOT_WARNING_FILTER}" if configured else ROOT_WARNING_FILTER,
    }


@dataclass
class _Slot:
    number: int
    argv: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_delay: float = 0.0
    restart_at: float = 0.0

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv, env=_slot_environment(self.number), preexec_fn=die_with_the_supervisor(os.getpid())
        )
        self.started_at = time.monotonic()
        logger.info("worker %s started (pid %s)", self.number, self.process.pid)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exited(self, now: float) -> None:
        """Schedules the next start of a worker that exited on its own."""
        logger.error("worker %s (pid %s) exited with %s", self.number, self.process.pid, self.process.returncode)
        self.process = None
        quick = now - self.started_at < QUICK_EXIT_SECONDS
        self.restart_delay = min(RESTART_DELAY_CAP_SECONDS, max(1.0, self.restart_delay * 2)) if quick else 0.0
        self.restart_at = now + self.restart_delay


# Celery's worker-to-worker chatter, which Impo does not use (readiness has a heartbeat of its own, impo/celery.py;
# nothing revokes or inspects tasks). Over Redis each of these logged ~150 traceback lines per worker process when
# the broker went away (Celery's "Error on restarting Gossip"), burying the lines operators watch.
WITHOUT_CHATTER = ["--without-gossip", "--without-mingle", "--without-heartbeat"]


class WorkerHost:
    def __init__(self, processes: int, celery_options: list[str]):
        celery = os.path.join(os.path.dirname(sys.executable), "celery")
        name, options = split_node_name(celery_options)
        quiet = [flag for flag in WITHOUT_CHATTER if flag not in options]
        self.slots = [
            _Slot(number, [celery, "-A", "impo", "worker", "-n", slot_node_name(name, number), *options, *quiet])
            for number in range(processes)
        ]
        self.stopping = False
        self.stop_signal = signal.SIGTERM
        self.signalled: set[int] = set()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            # Celery's warm shutdown either way: its second SIGINT (a terminal's Ctrl+C reaches the workers too,
            # being in the supervisor's process group) would be a cold one, abandoning the runs in hand.
            signal.signal(sig, lambda *_: self.stop(signal.SIGTERM))
        signal.signal(signal.SIGQUIT, lambda *_: self.stop(signal.SIGQUIT))
        for slot in self.slots:
            slot.start()
        while not self.stopping:
            now = time.monotonic()
            for slot in self.slots:
                if slot.process is not None and not slot.running:
                    slot.exited(now)
                if slot.process is None and now >= slot.restart_at and not self.stopping:
                    slot.start()
            time.sleep(POLL_SECONDS)
        # A worker started while the signal came (its process not yet recorded) is told now.
        self.signal_workers()
        for slot in self.slots:
            if slot.process is not None:
                slot.process.wait()
        return 0

    def stop(self, sig: signal.Signals) -> None:
        self.stopping = True
        self.stop_signal = sig
        self.signalled.clear()
        self.signal_workers()

    def signal_workers(self) -> None:
        for slot in self.slots:
            if slot.running and slot.process.pid not in self.signalled:
                slot.process.send_signal(self.stop_signal)
                self.signalled.add(slot.process.pid)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s: %(levelname)s/worker-host] %(message)s")
    processes = worker_processes()
    logger.info("starting %s worker processes", processes)
    sys.exit(WorkerHost(processes, sys.argv[1:]).run())


if __name__ == "__main__":
    main()
