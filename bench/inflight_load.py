"""Turns in flight for the in-flight benches: sizes, admission from a few threads, sampling the host while they run,
and where their time went."""

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import median_and_p95
from bench.worker_host import HOST
from devtools.stack import Stack, WorkerProcess, wait_until

REPLY_LENGTH = 100  # "Echo: " and the message: a turn of N deltas sends REPLY_LENGTH / N characters each
SAMPLE_SECONDS = 0.5
ADMITTING_THREADS = 8


@dataclass(frozen=True)
class InflightSizes:
    slow_turns: int
    slow_turn_seconds: int
    streaming_turns: int
    streaming_turn_seconds: int
    watched: int
    killed_turns: int
    first_delta_samples: int


FULL = InflightSizes(500, 20, 150, 10, 10, 200, 40)
QUICK = InflightSizes(50, 10, 30, 5, 5, 30, 10)


@dataclass
class Samples:
    """What the sampler saw of the host while turns were in flight."""

    connections: list[int] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)


def message_text(index: int) -> str:
    """A message whose echoed reply is exactly REPLY_LENGTH characters, so every delta carries the same share."""
    text = f"turn {index} "
    return text + "x" * (REPLY_LENGTH - len("Echo: ") - len(text))


def rss_mb(root: int) -> float:
    from bench.admission import _process_tree

    total_kb = 0
    for pid in _process_tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total_kb / 1024


def host_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [HOST])
        return cursor.fetchone()[0]


def runs_in_flight(run_ids: list) -> int:
    from runtime.models import Run, RunState

    return Run.objects.filter(id__in=run_ids, state=RunState.RUNNING).count()


class Sampler:
    """Samples the host every SAMPLE_SECONDS in a thread of its own, until stopped."""

    def __init__(self, host: WorkerProcess, run_ids: list):
        self.samples = Samples()
        self._host = host
        self._run_ids = run_ids
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self.samples

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()

    def _sample(self):
        from django.db import connection

        try:
            while not self._stop.wait(SAMPLE_SECONDS):
                if not self._host.alive:
                    continue
                self.samples.connections.append(host_connections())
                self.samples.rss_mb.append(rss_mb(self._host.process.pid))
                self.samples.in_flight.append(runs_in_flight(self._run_ids))
        finally:
            connection.close()


def admit(owners: list, texts: list[str], label: str) -> list[tuple[str, str, str]]:
    """One message to each owner's Main Chat, from a few threads at once; (run id, submission id, text) each."""
    from django.db import connection

    from runtime.models import Run
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_main_chat_message

    def one(args):
        owner, text = args
        try:
            command = MessageCommand(client_message_id=f"{label}-{uuid.uuid4()}", text=text)
            return command.client_message_id, submit_main_chat_message(owner=owner, command=command).submission_id
        finally:
            connection.close()

    with ThreadPoolExecutor(ADMITTING_THREADS) as pool:
        admitted = list(pool.map(one, zip(owners, texts, strict=True)))
    runs = dict(Run.objects.filter(submission_id__in=[s for _, s in admitted]).values_list("submission_id", "id"))
    return [
        (str(runs[submission_id]), str(submission_id), client_id, text)
        for (client_id, submission_id), text in zip(admitted, texts, strict=True)
    ]


def settle_seconds(submission_ids: list[str]) -> list[float]:
    """From each message's acceptance to its run's end, off the rows' own timestamps."""
    from runtime.models import Run

    rows = Run.objects.filter(submission_id__in=submission_ids).values_list("submission__created_at", "finished_at")
    return [(finished - accepted).total_seconds() for accepted, finished in rows]


def wait_settled(run_ids: list[str], timeout: float) -> None:
    from runtime.models import TERMINAL_RUN_STATES, Run

    runs = Run.objects.filter(id__in=run_ids)
    wait_until(
        lambda: runs.filter(state__in=TERMINAL_RUN_STATES).count() == len(run_ids),
        timeout=timeout,
        interval=0.5,
        what=f"{len(run_ids)} runs to settle",
    )


def pace(stack: Stack, *, turn_seconds: float, deltas: int) -> None:
    stack.double.configure(delta_delay_ms=round(1000 * turn_seconds / deltas), delta_chunks=deltas)


def phases(run_ids: list[str]) -> str:
    """Where a slow turn's time went, median (p95) of each leg: accepted → claimed → input sent (the session
    created with it, or the message event) → first reply text projected → settled."""
    from django.db.models import Min, Q

    from runtime.models import EventType, Run

    rows = (
        Run.objects.filter(id__in=run_ids)
        .exclude(started_at=None)
        .exclude(input_sent_at=None)
        .annotate(
            first_delta_at=Min(
                "submission__events__created_at", filter=Q(submission__events__type=EventType.TEXT_DELTA)
            )
        )
    )
    legs: dict[str, list[float]] = {"accepted → claimed": [], "→ input sent": [], "→ first text": [], "→ end": []}
    for run in rows.exclude(first_delta_at=None).exclude(finished_at=None):
        points = [run.created_at, run.started_at, run.input_sent_at, run.first_delta_at, run.finished_at]
        for leg, begin, end in zip(legs, points, points[1:], strict=False):
            legs[leg].append((end - begin).total_seconds())
    return ", ".join(
        f"{leg} {median:.1f} ({p95:.1f}) s"
        for leg, (median, p95) in ((leg, median_and_p95(values)) for leg, values in legs.items() if values)
    )


def run_outcomes(run_ids: list[str]) -> Counter:
    from runtime.models import Run

    return Counter(Run.objects.filter(id__in=run_ids).values_list("state", flat=True))
