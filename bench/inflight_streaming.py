"""Streaming turns in flight: worker CPU per provider delta beside its floors, and provider delta → websocket frame
for a few watched conversations (the delta's emission seen by a subscriber of the double's own live stream).
"""

import threading
import time

from bench import floors
from bench.admission import cpu_seconds
from bench.harness import Figure, median_and_p95
from bench.inflight_load import (
    REPLY_LENGTH,
    InflightSizes,
    Sampler,
    admit,
    message_text,
    pace,
    run_outcomes,
    settle_seconds,
    wait_settled,
)
from bench.worker_host import start_host
from impo.devstack import Stack, start_web
from impo.devtools.websocket import WebsocketConnection

# A host whose claims are bounded only by its threads: the burst's start as it was, beside the shipped bound.
UNBOUNDED_CLAIMS = 500

# The push of the floor: a group commit carries the projections of the runs whose window ended while the previous
# one committed, often several conversations; the alternatives are printed beside it.
FLOOR_PUSH = "one call for 10 conversations"


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


def streaming_turns(
    stack: Stack, users: list[tuple[int, str]], sizes: InflightSizes, *, claims_in_flight: int | None = None
) -> list[Figure]:
    """Every conversation has a session already (a first, quick message each): the watched ones' sessions are
    subscribed to at the double before the measured messages go. `claims_in_flight`: the host's
    IMPO_CLAIMS_IN_FLIGHT instead of the shipped one (the burst's start, side by side)."""
    from django.contrib.auth import get_user_model

    from bench.stream import subscription_url
    from rebyte.models import RemoteSession

    turns, seconds, deltas = sizes.streaming_turns, sizes.streaming_turn_seconds, sizes.streaming_turn_seconds * 10
    owners = list(get_user_model().objects.filter(id__in=[user_id for user_id, _ in users[:turns]]).order_by("id"))
    web, web_url = start_web(stack, name="inflight-web")
    host = start_host(stack, {"IMPO_CLAIMS_IN_FLIGHT": str(claims_in_flight)} if claims_in_flight else None)
    try:
        stack.double.configure(delta_delay_ms=0, delta_chunks=1)
        warm = admit(owners, [f"warm {i}" for i in range(turns)], "warm")
        wait_settled([run_id for run_id, *_ in warm], timeout=turns + 120)
        # The same turns with a one-delta reply: what a turn costs the host whatever its deltas.
        pace(stack, turn_seconds=seconds, deltas=1)
        fixed_cpu = cpu_seconds(host.process.pid)
        fixed = admit(owners, [message_text(i) for i in range(turns)], "fixed")
        wait_settled([run_id for run_id, *_ in fixed], timeout=seconds * 3 + 120)
        fixed_cpu = cpu_seconds(host.process.pid) - fixed_cpu
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
    pushes, event_ms = floors.push_alternatives(), floors.ThreadCpu.per_piece_ms(reading)
    push_ms = pushes[FLOOR_PUSH]

    def latencies(characters: range) -> list[float]:
        return [
            socket_times.time_of_character(index) - double_times.time_of_character(index)
            for double_times, socket_times in zip(at_double, at_socket, strict=True)
            for index in characters
            if socket_times.time_of_character(index) is not None and double_times.time_of_character(index) is not None
        ]

    def p95_ms(measured: list[float]) -> str:
        return f"{1000 * median_and_p95(measured)[1]:.0f} ms" if measured else "none"

    every = latencies(range(REPLY_LENGTH))
    halves = latencies(range(REPLY_LENGTH // 2)), latencies(range(REPLY_LENGTH // 2, REPLY_LENGTH))
    frames = sum(len(times.seen) for times in at_socket)
    delta_median, delta_p95 = median_and_p95(every) if every else (float("nan"), float("nan"))
    claims = f"IMPO_CLAIMS_IN_FLIGHT {claims_in_flight or 'as shipped'}"
    settled = settle_seconds([submission_id for _, submission_id, *_ in admitted])
    provider_deltas = turns * deltas
    return [
        Figure(
            f"{turns} streaming turns ({seconds} s each, 10 deltas/s), one worker host, {claims}: slowest acceptance → "
            "settled",
            max(settled),
            "s",
            baseline_name="the turn itself × 1.5",
            baseline=seconds * 1.5,
            higher_is_better=False,
            notes=[
                f"median {median_and_p95(settled)[0]:.1f} s; outcomes {dict(run_outcomes(run_ids))}; peak in flight "
                f"{max(samples.in_flight, default=0)}; host connections max {max(samples.connections, default=0)}",
                f"CPU: worker host {host_cpu:.1f} s, the double {double_cpu:.1f} s (apart), over {elapsed:.0f} s",
            ],
        ),
        Figure(
            f"worker CPU per provider delta beyond a one-delta turn's (streaming turns, {claims})",
            1000 * (host_cpu - fixed_cpu) / (turns * (deltas - 1)),
            "ms",
            baseline_name=f"one SDK live event + one push per delta, {FLOOR_PUSH} (same run)",
            baseline=push_ms + event_ms,
            higher_is_better=False,
            notes=[
                f"{provider_deltas} provider deltas, {host_cpu:.1f} s of worker host CPU "
                f"({1000 * host_cpu / provider_deltas:.2f} ms a delta, the turns' own costs included); the same "
                f"{turns} turns with a one-delta reply {fixed_cpu:.1f} s ({1000 * fixed_cpu / turns:.0f} ms a turn)",
                f"the pieces, CPU of the calling thread: a live event read by the SDK {event_ms:.2f} ms; a push per "
                "conversation, " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in pushes.items()),
            ],
        ),
        Figure(
            f"provider delta emitted → websocket frame, {len(watched)} watched conversations, {claims} (median)",
            delta_median * 1000,
            "ms",
            higher_is_better=False,
            notes=[
                f"p95 {delta_p95 * 1000:.0f} ms over {len(every)} characters (each reply's first half "
                f"{p95_ms(halves[0])}, second half {p95_ms(halves[1])}); {frames} text.delta frames for "
                f"{len(watched) * deltas} provider deltas"
            ],
        ),
    ]


def streaming_side_by_side(stack: Stack, sizes: InflightSizes) -> list[Figure]:
    """The streaming section with the claims bounded as shipped, then bounded only by the host's threads."""
    import os

    from bench.harness import create_users

    users = create_users(sizes.streaming_turns, f"streaming-{os.getpid()}")
    return [
        *streaming_turns(stack, users, sizes),
        *streaming_turns(stack, users, sizes, claims_in_flight=UNBOUNDED_CLAIMS),
    ]
