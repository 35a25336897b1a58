"""Stream: time from POST to the first `text.delta` on the conversation's websocket, against the bare hops it is made
of, measured in the same run: a Celery round trip on the same broker, and a `group_send` from another process to a
websocket through the same server. The POST goes to one "host" and the socket is held on the other, so the figure
also shows that nothing of a conversation is local to a web process or a worker.
"""

import asyncio
import json
import statistics
import time
import uuid
from dataclasses import dataclass

import httpx
import redis
from websockets.asyncio.client import connect

from bench.harness import Figure, median_and_p95
from devtools.stack import VENV_BIN, ServiceProcess, Stack, start_web, wait_until
from devtools.websocket import WebsocketConnection

WARM_UP_SAMPLES = 10


@dataclass
class Host:
    """One "machine" of the run: a web server and a Celery worker with a queue and a name of their own."""

    name: str
    web: ServiceProcess
    web_url: str
    queue: str
    worker: ServiceProcess | None = None


def start_hosts(stack: Stack, names: tuple[str, ...], *, web_processes: int) -> list[Host]:
    hosts = []
    for name in names:
        queue = f"{stack.env.get('CELERY_QUEUE', 'impo')}-{name}"
        web, web_url = start_web(stack, processes=web_processes, name=f"web-{name}", env={"CELERY_QUEUE": queue})
        hosts.append(Host(name, web, web_url, queue))
    return hosts


def start_workers(stack: Stack, hosts: list[Host]) -> None:
    """Each host's worker, on a queue emptied first: the admission benchmark's wake-ups (of runs it retired) wait
    there, and a probe's wake-up must not queue behind thousands of them."""
    from impo.celery import app

    with app.connection_for_write() as connection:
        for host in hosts:
            connection.default_channel.queue_purge(host.queue)
    for host in hosts:
        host.worker = stack.start_worker(f"bench-worker@{host.name}", queue=host.queue)


def stop_workers(hosts: list[Host]) -> None:
    for host in hosts:
        if host.worker is not None:
            host.worker.stop()
            host.worker = None


def subscription_url(web_url: str, user_id: int, token: str) -> str:
    """The user's Main Chat socket, resuming after its last event: history replay is not what is measured."""
    from django.contrib.auth import get_user_model

    from runtime.services.commands import ensure_main_conversation

    conversation = ensure_main_conversation(get_user_model().objects.get(id=user_id))
    ws_url = web_url.replace("http://", "ws://")
    return f"{ws_url}/ws/v1/conversations/{conversation.id}/?token={token}&after={conversation.last_event_seq}"


def _next_event_of(socket: WebsocketConnection, types: set[str], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        event = socket.receive_json(timeout=max(0.01, deadline - time.monotonic()))
        if event["type"] in types:
            return event


# Where a first delta's time goes, from the rows' own timestamps (one clock: every process is on this machine).
LEGS = (
    "POST answered",
    "POST → run.started row (wake-up, Celery, claim)",
    "run.started → first text.delta row (provider calls, projection)",
    "first text.delta row → socket (commit, channel layer)",
)


@dataclass
class Sample:
    seconds: float
    legs: tuple[float, ...]


def first_delta_samples(post_url: str, socket_url: str, probe: tuple[int, str], samples: int) -> list[Sample]:
    """From sending the POST (to `post_url`) to reading the reply's first delta on a socket held at `socket_url`,
    one message at a time, with the legs of each (LEGS)."""
    user_id, token = probe
    socket = WebsocketConnection(subscription_url(socket_url, user_id, token))
    measured = []
    try:
        with httpx.Client(base_url=post_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            for index in range(samples):
                body = {"clientMessageId": str(uuid.uuid4()), "text": f"probe {index}"}
                started, started_at = time.perf_counter(), time.time()
                answer = http.post("/api/v1/conversation/messages", json=body)
                answered_at = time.time()
                answer.raise_for_status()
                _next_event_of(socket, {"text.delta"})
                seconds, received_at = time.perf_counter() - started, time.time()
                _next_event_of(socket, {"run.completed", "run.failed"})
                claimed_at, first_delta_at = _event_times(answer.json()["submissionId"])
                legs = (answered_at - started_at, claimed_at - started_at, first_delta_at - claimed_at)
                measured.append(Sample(seconds, (*legs, received_at - first_delta_at)))
    finally:
        socket.close()
    return measured


def _event_times(submission_id: str) -> tuple[float, float]:
    """When the submission's first `run.started` and first `text.delta` rows were inserted (epoch seconds)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM min(created_at) FILTER (WHERE type = 'run.started')),"
            " extract(epoch FROM min(created_at) FILTER (WHERE type = 'text.delta'))"
            " FROM runtime_event WHERE submission_id = %s",
            [submission_id],
        )
        claimed_at, first_delta_at = cursor.fetchone()
    return float(claimed_at), float(first_delta_at)


async def _group_send_round_trips(forward_url: str, samples: int) -> list[float]:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    latencies = []
    async with connect(forward_url) as socket:
        group = json.loads(await socket.recv())["group"]
        for index in range(samples + WARM_UP_SAMPLES):
            started = time.perf_counter()
            await layer.group_send(group, {"type": "bench.forward", "body": {"index": index}})
            assert json.loads(await socket.recv()) == {"index": index}
            if index >= WARM_UP_SAMPLES:  # the first sends open the layer's connections
                latencies.append(time.perf_counter() - started)
    return latencies


def group_send_round_trips(stack: Stack, samples: int) -> list[float]:
    """`group_send` from this process → the channel layer → a bare consumer on the same server → its websocket."""
    server, forward_url = start_web(stack, "bench.echo_asgi:application", name="bench-forward")
    try:
        return asyncio.run(_group_send_round_trips(f"{forward_url.replace('http://', 'ws://')}/forward/", samples))
    finally:
        server.stop()


def celery_round_trips(stack: Stack, samples: int) -> list[float]:
    """A trivial task published on the same broker, run by a prefork worker, answered through Redis."""
    from bench.celery_ping import app

    queue = f"bench-ping-{uuid.uuid4().hex[:8]}"
    worker = ServiceProcess(
        "bench-ping-worker",
        [str(VENV_BIN / "celery"), "-A", "bench.celery_ping", "worker", "--pool", "prefork", "--concurrency", "1"]
        + ["-n", f"{queue}@%h", "-Q", queue, "--without-mingle", "--without-gossip", "-l", "info"],
        env=stack.env,
    )
    replies = redis.Redis.from_url(stack.env["REDIS_URL"])
    try:
        wait_until(lambda: " ready." in worker.log_text(), timeout=60, what=f"the ping worker ({worker.log_path})")
        latencies = []
        for index in range(samples + WARM_UP_SAMPLES):
            reply_key = f"{queue}:reply:{index}"
            started = time.perf_counter()
            app.send_task("bench.ping", args=[reply_key], queue=queue)
            if replies.blpop([reply_key], timeout=30) is None:
                raise RuntimeError(f"no ping reply; see {worker.log_path}")
            if index >= WARM_UP_SAMPLES:
                latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        worker.stop()
        replies.close()


def _baseline(name: str, latencies: list[float]) -> Figure:
    median, p95 = median_and_p95(latencies)
    return Figure(
        f"baseline: {name} (median)", median * 1000, "ms", higher_is_better=False, notes=[f"p95 {p95 * 1000:.2f} ms"]
    )


def baselines(stack: Stack, samples: int) -> tuple[Figure, Figure]:
    return (
        _baseline("bare group_send from another process → websocket", group_send_round_trips(stack, samples)),
        _baseline("bare Celery round trip, trivial task on the same broker", celery_round_trips(stack, samples)),
    )


def measure(
    hosts: list[Host], probe: tuple[int, str], others_open: int, *, samples: int, baseline: Figure
) -> tuple[Figure, list[float]]:
    """The first-delta figure against `baseline` (the bare group_send); the latencies for later comparisons."""
    poster, listener = hosts[0], hosts[-1]
    first_delta_samples(poster.web_url, listener.web_url, probe, 3)  # agent and session creation happen once
    measured = first_delta_samples(poster.web_url, listener.web_url, probe, samples)
    latencies = [sample.seconds for sample in measured]
    median, p95 = median_and_p95(latencies)
    legs = [
        f"median {name}: {1000 * statistics.median(sample.legs[index] for sample in measured):.1f} ms"
        for index, name in enumerate(LEGS)
    ]
    figure = Figure(
        f"POST ({poster.name}) → first text.delta on a socket ({listener.name}), {others_open} other sockets open "
        "(median)",
        median * 1000,
        "ms",
        baseline_name=baseline.name.removeprefix("baseline: "),
        baseline=baseline.value,
        higher_is_better=False,
        notes=[f"p95 {p95 * 1000:.1f} ms", *legs],
    )
    return figure, latencies
