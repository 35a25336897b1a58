"""Streaming turns in flight: worker CPU per provider delta beside its floors, and provider delta → websocket frame
for a few watched conversations (the delta's emission seen by a subscriber of the double's own live stream).

A delta's floor (issue 48): its event's bytes decoded by a fast JSON decoder, plus one push per window of deltas.
"""

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

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
from devtools.stack import Stack, start_web
from devtools.websocket import WebsocketConnection

# A host whose claims are bounded only by its threads: the burst's start as it was, beside the shipped bound.
UNBOUNDED_CLAIMS = 500

# The push of the floor: a group commit carries the projections of the runs whose window ended while the previous
# one committed, often several conversations; the alternatives are printed beside it.
FLOOR_PUSH = "one call for 10 conversations"
DELTAS_PER_SECOND = 10


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
    """The session's live deltas as the double emits them, read by a subscriber of its own through the gateway (the
    thread's CPU per event read is the reading's share of a worker's live stream)."""
    with stack.double.gateway() as gateway, gateway.live_events(session_id) as events:
        ready.set()
        cpu.start()
        for event in events:
            cpu.stop(1)
            if event.type == "agent.session.turn.output_text.delta":
                times.add(event.text)
            elif event.type in ("agent.session.turn.completed", "agent.session.turn.failed") or stop.is_set():
                return
            cpu.start()


def capture_delta_bytes(stack: Stack, session_id: str, payloads: list, ready: threading.Event, stop: threading.Event):
    """The bytes of the session's delta events as sent (each SSE `data` field, no padding as the gateway asks), for
    the floor: a measuring instrument, not a client (the gateway reads through the SDK)."""
    import httpx

    headers = {"OpenAI-Beta": "agents=v1", "Authorization": "Bearer test-key", "Accept": "text/event-stream"}
    url = f"{stack.double.api_url}/agents/sessions/{session_id}/events"
    with httpx.stream("GET", url, params={"include_obfuscation": "false"}, headers=headers, timeout=120) as response:
        ready.set()
        for line in response.iter_lines():
            if line.startswith("data:") and '"agent.session.turn.output_text.delta"' in line:
                payloads.append(line[5:].strip().encode())
            elif '"agent.session.turn.completed"' in line or '"agent.session.turn.failed"' in line or stop.is_set():
                return


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


@dataclass
class Watchers:
    """A few conversations' deltas, seen as the double emits them (with the SDK's CPU per event read) and as their
    websocket frames arrive."""

    at_double: list[DeltaTimes]
    at_socket: list[DeltaTimes]
    reading: list[floors.ThreadCpu]
    delta_bytes: list[bytes] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def start(cls, stack: Stack, web_url: str, watched: list, tokens: dict[int, str]) -> "Watchers":
        """Watches the owners' current sessions at the double and their sockets, each reader connected on return."""
        from bench.stream import subscription_url
        from rebyte.models import RemoteSession

        count = len(watched)
        watchers = cls([DeltaTimes() for _ in range(count)], [DeltaTimes() for _ in range(count)], [])
        watchers.reading.extend(floors.ThreadCpu() for _ in range(count))
        for index, owner in enumerate(watched):
            session = RemoteSession.objects.get(conversation__owner=owner, state="current")
            readers = [
                (watch_double, (stack, session.remote_id, watchers.at_double[index], watchers.reading[index])),
                (watch_socket, (subscription_url(web_url, owner.id, tokens[owner.id]), watchers.at_socket[index])),
            ]
            if index == 0:
                readers.append((capture_delta_bytes, (stack, session.remote_id, watchers.delta_bytes)))
            for target, args in readers:
                ready = threading.Event()
                thread = threading.Thread(target=target, args=(*args, ready, watchers.stop), daemon=True)
                thread.start()
                watchers.threads.append(thread)
                if not ready.wait(30):
                    raise RuntimeError("a watcher could not connect")
        return watchers

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def latencies(self, characters: range) -> list[float]:
        """Double emission → websocket frame, per character of each watched reply seen at both ends."""
        return [
            socket_times.time_of_character(index) - double_times.time_of_character(index)
            for double_times, socket_times in zip(self.at_double, self.at_socket, strict=True)
            for index in characters
            if socket_times.time_of_character(index) is not None and double_times.time_of_character(index) is not None
        ]


@dataclass
class StreamingMeasure:
    """What one streaming section measured: the host's and the double's CPU over the measured turns, beside the
    host's CPU for the same turns with a one-delta reply, and how the turns settled."""

    turns: int
    seconds: int
    deltas: int
    claims: str
    fixed_cpu: float
    host_cpu: float
    double_cpu: float
    elapsed: float
    run_ids: list
    settled: list[float]
    in_flight_peak: int
    connections_peak: int


def streaming_turns(
    stack: Stack, users: list[tuple[int, str]], sizes: InflightSizes, *, claims_in_flight: int | None = None
) -> list[Figure]:
    """Every conversation has a session already (a first, quick message each): the watched ones' sessions are
    subscribed to at the double before the measured messages go. `claims_in_flight`: the host's
    IMPO_CLAIMS_IN_FLIGHT instead of the shipped one (the burst's start, side by side)."""
    from django.contrib.auth import get_user_model

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
        watchers = Watchers.start(stack, web_url, owners[: sizes.watched], dict(users))
        claims = f"IMPO_CLAIMS_IN_FLIGHT {claims_in_flight or 'as shipped'}"
        outcome = _measure(stack, host, owners, turns, seconds)
        measured = StreamingMeasure(turns, seconds, deltas, claims, fixed_cpu, **outcome)
        watchers.finish()
    finally:
        host.stop()
        web.stop()
    return _figures(measured, watchers)


def _measure(stack: Stack, host, owners: list, turns: int, seconds: int) -> dict[str, Any]:
    """Admits a turn for each owner and waits for them to settle: the measured fields of a `StreamingMeasure`."""
    double_cpu, host_cpu = cpu_seconds(stack.double.process.pid), cpu_seconds(host.process.pid)
    started = time.monotonic()
    admitted = admit(owners, [message_text(i) for i in range(turns)], "stream")
    run_ids = [run_id for run_id, *_ in admitted]
    with Sampler(host, run_ids) as samples:
        wait_settled(run_ids, timeout=seconds * 3 + 120)
    return dict(
        elapsed=time.monotonic() - started,
        double_cpu=cpu_seconds(stack.double.process.pid) - double_cpu,
        host_cpu=cpu_seconds(host.process.pid) - host_cpu,
        run_ids=run_ids,
        settled=settle_seconds([submission_id for _, submission_id, *_ in admitted]),
        in_flight_peak=max(samples.in_flight, default=0),
        connections_peak=max(samples.connections, default=0),
    )


def _figures(measured: StreamingMeasure, watchers: Watchers) -> list[Figure]:
    return [_settle_figure(measured), *_cpu_figure(measured, watchers), _latency_figure(measured, watchers)]


def _settle_figure(m: StreamingMeasure) -> Figure:
    return Figure(
        f"{m.turns} streaming turns ({m.seconds} s each, 10 deltas/s), one worker host, {m.claims}: slowest "
        "acceptance → settled",
        max(m.settled),
        "s",
        baseline_name="the turn itself × 1.5",
        baseline=m.seconds * 1.5,
        higher_is_better=False,
        notes=[
            f"median {median_and_p95(m.settled)[0]:.1f} s; outcomes {dict(run_outcomes(m.run_ids))}; peak in flight "
            f"{m.in_flight_peak}; host connections max {m.connections_peak}",
            f"CPU: worker host {m.host_cpu:.1f} s, the double {m.double_cpu:.1f} s (apart), over {m.elapsed:.0f} s",
        ],
    )


def _cpu_figure(m: StreamingMeasure, watchers: Watchers) -> list[Figure]:
    """Worker CPU per delta beyond a one-delta turn's, and with the turns' own costs, each against a delta's floor."""
    pushes, event_ms = floors.push_alternatives(), floors.ThreadCpu.per_piece_ms(watchers.reading)
    decode_ms = floors.json_decode_cpu_ms(watchers.delta_bytes) if watchers.delta_bytes else float("nan")
    reads = floors.sdk_read_cpu_ms(watchers.delta_bytes) if watchers.delta_bytes else {}
    deltas_per_window = max(1.0, DELTAS_PER_SECOND * settings.IMPO_DELTA_WINDOW_SECONDS)
    floor = decode_ms + pushes[FLOOR_PUSH] / deltas_per_window
    floor_name = f"the delta's bytes decoded by ujson + one push per window ({FLOOR_PUSH}, same run)"
    provider_deltas = m.turns * m.deltas
    notes = [
        f"{provider_deltas} provider deltas; the same {m.turns} turns with a one-delta reply {m.fixed_cpu:.1f} s of "
        f"worker host CPU ({1000 * m.fixed_cpu / m.turns:.0f} ms a turn)",
        f"the pieces, CPU of the calling thread: a delta's bytes decoded by ujson {decode_ms:.4f} ms (over "
        f"{len(watchers.delta_bytes)} events of one reply); {deltas_per_window:g} delta(s) per window; a live event "
        f"read through the gateway {event_ms:.3f} ms (the floor of issue 44, one of them + one push: "
        f"{event_ms + pushes[FLOOR_PUSH]:.2f} ms); a push per conversation, "
        + ", ".join(f"{name} {ms:.2f} ms" for name, ms in pushes.items()),
        "the same delta events read from one body in memory, per event: "
        + ", ".join(f"{name} {ms:.3f} ms" for name, ms in reads.items()),
    ]
    return [
        Figure(
            f"worker CPU per provider delta beyond a one-delta turn's (streaming turns, {m.claims})",
            1000 * (m.host_cpu - m.fixed_cpu) / (m.turns * (m.deltas - 1)),
            "ms",
            baseline_name=floor_name,
            baseline=floor,
            higher_is_better=False,
            notes=notes,
        ),
        Figure(
            f"worker CPU per provider delta, the turns' own costs included ({m.claims})",
            1000 * m.host_cpu / provider_deltas,
            "ms",
            baseline_name=floor_name,
            baseline=floor,
            higher_is_better=False,
            notes=[f"{m.host_cpu:.1f} s of worker host CPU for {provider_deltas} provider deltas"],
        ),
    ]


def _latency_figure(m: StreamingMeasure, watchers: Watchers) -> Figure:
    def p95_ms(measured: list[float]) -> str:
        return f"{1000 * median_and_p95(measured)[1]:.0f} ms" if measured else "none"

    every = watchers.latencies(range(REPLY_LENGTH))
    halves = watchers.latencies(range(REPLY_LENGTH // 2)), watchers.latencies(range(REPLY_LENGTH // 2, REPLY_LENGTH))
    frames = sum(len(times.seen) for times in watchers.at_socket)
    delta_median, delta_p95 = median_and_p95(every) if every else (float("nan"), float("nan"))
    watched = len(watchers.at_socket)
    return Figure(
        f"provider delta emitted → websocket frame, {watched} watched conversations, {m.claims} (median)",
        delta_median * 1000,
        "ms",
        higher_is_better=False,
        notes=[
            f"p95 {delta_p95 * 1000:.0f} ms over {len(every)} characters (each reply's first half "
            f"{p95_ms(halves[0])}, second half {p95_ms(halves[1])}); {frames} text.delta frames for "
            f"{watched * m.deltas} provider deltas"
        ],
    )


def streaming_side_by_side(stack: Stack, sizes: InflightSizes) -> list[Figure]:
    """The streaming section with the claims bounded as shipped, then bounded only by the host's threads."""
    import os

    from bench.harness import create_users

    users = create_users(sizes.streaming_turns, f"streaming-{os.getpid()}")
    return [
        *streaming_turns(stack, users, sizes),
        *streaming_turns(stack, users, sizes, claims_in_flight=UNBOUNDED_CLAIMS),
    ]
