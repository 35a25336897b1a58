"""In flight: one worker host, as shipped, driving hundreds of long turns at once (issue 27).

- slow turns: every turn 20 s at the double (1 delta/s); each must settle within 1.5× that, while the host's
  PostgreSQL connections (pg_stat_activity by the host's application name) and RSS are sampled: first the first
  message of each user (the user's agent and session created), then a second one (an input event to the session);
- streaming turns: 10 s at 10 deltas/s; worker CPU per provider delta, and provider delta → websocket frame for
  a few watched conversations (the delta's emission seen by a subscriber of the double's own live stream);
- the host SIGKILLed with turns in flight, a fresh one taking over: the chaos invariants on every run;
- POST → first delta on an idle host, with the provider's share apart (bench/own_share.py).
The double's CPU is printed apart: it shares the machine and must not be what limits the figures.
"""

import os
import threading
import time
import types
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench import floors, own_share
from bench.admission import cpu_seconds
from bench.harness import Figure, create_users, median_and_p95
from bench.worker_host import HOST, LEASE_SECONDS, start_host
from impo.devstack import Stack, WorkerProcess, start_web, wait_until

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


def slow_turns(stack: Stack, owners: list, sizes: InflightSizes, *, which: str) -> list[Figure]:
    """One message to each owner at once; `which` names it (each user's first message creates the user's agent
    and session with the input; a later one goes to the session as an input event, its stream open before it)."""
    turns, seconds = sizes.slow_turns, sizes.slow_turn_seconds
    pace(stack, turn_seconds=seconds, deltas=seconds)
    host = start_host(stack)
    calls = Counter(stack.double.state()["requests"])
    double_cpu, host_cpu = cpu_seconds(stack.double.process.pid), cpu_seconds(host.process.pid)
    try:
        started = time.monotonic()
        admitted = admit(owners[:turns], [message_text(i) for i in range(turns)], f"slow-{which}")
        admitting = time.monotonic() - started
        run_ids = [run_id for run_id, *_ in admitted]
        with Sampler(host, run_ids) as samples:
            wait_settled(run_ids, timeout=seconds * 3 + 120)
        elapsed = time.monotonic() - started
        double_cpu = cpu_seconds(stack.double.process.pid) - double_cpu
        host_cpu = cpu_seconds(host.process.pid) - host_cpu
        calls = Counter(stack.double.state()["requests"]) - calls
    finally:
        host.stop()
    settled = settle_seconds([submission_id for _, submission_id, *_ in admitted])
    median, p95 = median_and_p95(settled)
    outcomes = _outcomes(run_ids)
    call_ms = floors.sdk_call_cpu_ms(stack, owners[0])
    requests = calls.total() - calls["session_events"]
    return [
        Figure(
            f"{turns} slow turns ({seconds} s each, 1 delta/s, {which} message of each user), one worker host: "
            "slowest acceptance → settled",
            max(settled),
            "s",
            baseline_name="the turn itself × 1.5",
            baseline=seconds * 1.5,
            higher_is_better=False,
            notes=[
                f"median {median:.1f} s, p95 {p95:.1f} s; outcomes {dict(outcomes)}; admitted in {admitting:.1f} s "
                f"({ADMITTING_THREADS} threads), all settled {elapsed:.1f} s after the first admission",
                f"where the time went, median (p95): {phases(run_ids)}",
                f"peak in flight {max(samples.in_flight, default=0)} of {turns}",
                f"PostgreSQL connections held by the host: max {max(samples.connections, default=0)} over "
                f"{len(samples.connections)} samples (every {SAMPLE_SECONDS} s)",
                f"host RSS: max {max(samples.rss_mb, default=0):.0f} MB",
                f"CPU: worker host {host_cpu:.1f} s, the double {double_cpu:.1f} s (apart), over {elapsed:.0f} s",
                f"provider calls per run: {requests / turns:.1f} ({calls['list_items'] / turns:.1f} reads of the "
                f"items, {calls['list_turns'] / turns:.1f} of the turns) and {calls['session_events'] / turns:.1f} "
                f"live streams; one SDK call (a read of the items) costs {call_ms:.2f} ms of CPU here, so the host's "
                f"{1000 * host_cpu / turns:.0f} ms per run include about {requests / turns * call_ms:.0f} ms of calls",
            ],
        )
    ]


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


def _outcomes(run_ids: list[str]) -> Counter:
    from runtime.models import Run

    return Counter(Run.objects.filter(id__in=run_ids).values_list("state", flat=True))


class DeltaTimes:
    """(time seen, characters so far) per delta of one conversation's reply, from one source."""

    def __init__(self):
        self.seen: list[tuple[float, int]] = []
        self.length = 0

    def add(self, text: str) -> None:
        self.length += len(text)
        self.seen.append((time.monotonic(), self.length))

    def time_of_character(self, index: int) -> float | None:
        return next((seen for seen, length in self.seen if length > index), None)


def watch_double(
    stack: Stack,
    session_id: str,
    times: DeltaTimes,
    cpu: floors.ThreadCpu,
    ready: threading.Event,
    stop: threading.Event,
):
    """The session's live deltas as the double emits them, read by a subscriber of its own through the SDK (the
    thread's CPU per event read is the SDK's share of a worker's live stream)."""
    with stack.double.gateway() as gateway, gateway.live_events(session_id) as events:
        ready.set()
        cpu.start()
        for event in events:
            cpu.stop(1)
            if event.type == "agent.session.turn.output_text.delta":
                times.add(event.delta)
            elif event.type in ("agent.session.turn.completed", "agent.session.turn.failed") or stop.is_set():
                return
            cpu.start()


def watch_socket(url: str, times: DeltaTimes, ready: threading.Event, stop: threading.Event):
    from tests.chaos.websocket import WebsocketConnection

    socket = WebsocketConnection(url)
    ready.set()
    try:
        while True:
            event = socket.receive_json(timeout=120)
            if event["type"] == "text.delta":
                times.add(event["payload"]["delta"])
            elif event["type"] in ("run.completed", "run.failed", "run.cancelled") or stop.is_set():
                return
    finally:
        socket.close()


def streaming_turns(stack: Stack, users: list[tuple[int, str]], sizes: InflightSizes) -> list[Figure]:
    """Every conversation has a session already (a first, quick message each): the watched ones' sessions are
    subscribed to at the double before the measured messages go."""
    from django.contrib.auth import get_user_model

    from bench.stream import subscription_url
    from rebyte.models import RemoteSession

    turns, seconds, deltas = sizes.streaming_turns, sizes.streaming_turn_seconds, sizes.streaming_turn_seconds * 10
    owners = list(get_user_model().objects.filter(id__in=[user_id for user_id, _ in users[:turns]]).order_by("id"))
    web, web_url = start_web(stack, processes=1, name="inflight-web")
    host = start_host(stack)
    try:
        stack.double.configure(delta_delay_ms=0, delta_chunks=1)
        warm = admit(owners, [f"warm {i}" for i in range(turns)], "warm")
        wait_settled([run_id for run_id, *_ in warm], timeout=turns + 120)
        pace(stack, turn_seconds=seconds, deltas=deltas)
        watched = owners[: sizes.watched]
        tokens = dict(users)
        at_double = [DeltaTimes() for _ in watched]
        at_socket = [DeltaTimes() for _ in watched]
        reading = [floors.ThreadCpu() for _ in watched]
        stop = threading.Event()
        threads = []
        for index, owner in enumerate(watched):
            session = RemoteSession.objects.get(conversation__owner=owner, state="current")
            for target, args in (
                (watch_double, (stack, session.remote_id, at_double[index], reading[index])),
                (watch_socket, (subscription_url(web_url, owner.id, tokens[owner.id]), at_socket[index])),
            ):
                ready = threading.Event()
                thread = threading.Thread(target=target, args=(*args, ready, stop), daemon=True)
                thread.start()
                threads.append(thread)
                if not ready.wait(30):
                    raise RuntimeError("a watcher could not connect")
        double_cpu, host_cpu = cpu_seconds(stack.double.process.pid), cpu_seconds(host.process.pid)
        started = time.monotonic()
        admitted = admit(owners, [message_text(i) for i in range(turns)], "stream")
        run_ids = [run_id for run_id, *_ in admitted]
        with Sampler(host, run_ids) as samples:
            wait_settled(run_ids, timeout=seconds * 3 + 120)
        elapsed = time.monotonic() - started
        double_cpu = cpu_seconds(stack.double.process.pid) - double_cpu
        host_cpu = cpu_seconds(host.process.pid) - host_cpu
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        host.stop()
        web.stop()
    push_ms, event_ms = floors.push_cpu_ms(), floors.ThreadCpu.per_piece_ms(reading)
    latencies = [
        socket_times.time_of_character(index) - double_times.time_of_character(index)
        for double_times, socket_times in zip(at_double, at_socket, strict=True)
        for index in range(REPLY_LENGTH)
        if socket_times.time_of_character(index) is not None and double_times.time_of_character(index) is not None
    ]
    frames = sum(len(times.seen) for times in at_socket)
    delta_median, delta_p95 = median_and_p95(latencies) if latencies else (float("nan"), float("nan"))
    settled = settle_seconds([submission_id for _, submission_id, *_ in admitted])
    provider_deltas = turns * deltas
    return [
        Figure(
            f"{turns} streaming turns ({seconds} s each, 10 deltas/s), one worker host: slowest acceptance → settled",
            max(settled),
            "s",
            baseline_name="the turn itself × 1.5",
            baseline=seconds * 1.5,
            higher_is_better=False,
            notes=[
                f"median {median_and_p95(settled)[0]:.1f} s; outcomes {dict(_outcomes(run_ids))}; peak in flight "
                f"{max(samples.in_flight, default=0)}; host connections max {max(samples.connections, default=0)}",
                f"CPU: worker host {host_cpu:.1f} s, the double {double_cpu:.1f} s (apart), over {elapsed:.0f} s",
            ],
        ),
        Figure(
            "worker CPU per provider delta (streaming turns)",
            1000 * host_cpu / provider_deltas,
            "ms",
            baseline_name="one SDK live event + one channel-layer push (same run)",
            baseline=push_ms + event_ms,
            higher_is_better=False,
            notes=[
                f"{provider_deltas} provider deltas, {host_cpu:.1f} s of worker host CPU",
                f"the pieces, CPU of the calling thread: a push {push_ms:.2f} ms, a live event read by the SDK "
                f"{event_ms:.2f} ms",
            ],
        ),
        Figure(
            f"provider delta emitted → websocket frame, {len(watched)} watched conversations (median)",
            delta_median * 1000,
            "ms",
            higher_is_better=False,
            notes=[
                f"p95 {delta_p95 * 1000:.0f} ms over {len(latencies)} characters; {frames} text.delta frames for "
                f"{len(watched) * deltas} provider deltas"
            ],
        ),
    ]


def killed_host(stack: Stack, owners: list, sizes: InflightSizes) -> list[Figure]:
    """Turns in flight on a host that is SIGKILLed; a fresh host and the sweeper take them over."""
    from tests.chaos import invariants
    from tests.chaos.runner import Command, ConversationRecord, Figures

    turns, seconds = sizes.killed_turns, sizes.slow_turn_seconds
    pace(stack, turn_seconds=seconds, deltas=seconds)
    first = start_host(stack)
    sweeper = stack.start_sweeper()
    second = None
    try:
        admitted = admit(owners[:turns], [message_text(i) for i in range(turns)], "kill")
        run_ids = [run_id for run_id, *_ in admitted]
        wait_until(lambda: runs_in_flight(run_ids) == turns, timeout=120, interval=0.2, what=f"{turns} turns in flight")
        time.sleep(seconds / 4)  # each turn part-way through its reply
        first.kill()
        killed_at = time.monotonic()
        second = start_host(stack)
        wait_settled(run_ids, timeout=seconds * 3 + 180)
        recovered = time.monotonic() - killed_at
    finally:
        for process in (first, second, sweeper):
            if process is not None:
                process.stop()
    by_user = {owner.id: owner for owner in owners}
    from runtime.models import Submission

    owner_of = dict(
        Submission.objects.filter(id__in=[s for _, s, *_ in admitted]).values_list("id", "owner_id").iterator()
    )
    records = [
        ConversationRecord(
            index=index,
            user=by_user[owner_of[uuid.UUID(submission_id)]],
            kind="main_chat",
            commands=[Command(client_message_id=client_id, text=text, submission_id=submission_id)],
        )
        for index, (_, submission_id, client_id, text) in enumerate(admitted)
    ]
    chaos = types.SimpleNamespace(
        records=records, users=[record.user for record in records], stack=stack, figures=Figures()
    )
    double_state = stack.double.state()
    violations = [
        *invariants.check_commands_settled(chaos),
        *invariants.check_one_turn_per_run(chaos, double_state),
        *invariants.check_one_input_per_run_and_no_steering(chaos, double_state),
        *invariants.check_event_sequences(chaos),
        *invariants.check_assistant_text(chaos),
    ]
    return [
        Figure(
            f"host SIGKILLed with {turns} turns in flight, a fresh host takes over: invariant violations",
            len(violations),
            "violations",
            higher_is_better=False,
            notes=[
                f"outcomes {dict(_outcomes(run_ids))}; all settled {recovered:.1f} s after the kill "
                f"(turns of {seconds} s, leases of {LEASE_SECONDS} s)",
                *violations[:10],
            ],
        )
    ]


def measure(stack: Stack, sizes: InflightSizes) -> list[Figure]:
    from django.contrib.auth import get_user_model

    from impo.celery import app

    app.control.purge()
    count = max(sizes.slow_turns, sizes.streaming_turns, sizes.killed_turns)
    figures = []
    users = create_users(count, f"inflight-{os.getpid()}")
    owners = list(get_user_model().objects.filter(id__in=[user_id for user_id, _ in users]).order_by("id"))
    figures.extend(slow_turns(stack, owners, sizes, which="first"))
    figures.extend(slow_turns(stack, owners, sizes, which="second"))
    streaming_users = create_users(sizes.streaming_turns, f"streaming-{os.getpid()}")
    figures.extend(streaming_turns(stack, streaming_users, sizes))
    killed_users = create_users(sizes.killed_turns, f"killed-{os.getpid()}")
    killed_owners = list(
        get_user_model().objects.filter(id__in=[user_id for user_id, _ in killed_users]).order_by("id")
    )
    figures.extend(killed_host(stack, killed_owners, sizes))
    figures.extend(own_share.measure(stack, create_users(1, f"first-{os.getpid()}")[0], sizes.first_delta_samples))
    stack.double.configure(delta_delay_ms=0, delta_chunks=4)
    return figures
