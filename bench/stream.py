"""Stream: time from POST to the first `text.delta` on the conversation's websocket, against a bare Channels
echo round trip through the same channel layer, optionally with many other conversations' sockets open.
"""

import contextlib
import time
import uuid

import httpx

from bench.harness import Figure, median_and_p95
from tests.chaos.websocket import WebsocketConnection
from tests.processes import Stack, start_web


def subscription_url(web_url: str, user_id: int, token: str) -> str:
    """The user's Main Chat socket, resuming after its last event: history replay is not what is measured."""
    from django.contrib.auth import get_user_model

    from runtime.services import ensure_main_conversation

    conversation = ensure_main_conversation(get_user_model().objects.get(id=user_id))
    ws_url = web_url.replace("http://", "ws://")
    return f"{ws_url}/ws/v1/conversations/{conversation.id}/?token={token}&after={conversation.last_event_seq}"


def _next_event_of(socket: WebsocketConnection, types: set[str], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        event = socket.receive_json(timeout=max(0.01, deadline - time.monotonic()))
        if event["type"] in types:
            return event


def first_delta_latencies(web_url: str, probe: tuple[int, str], samples: int) -> list[float]:
    """Seconds from sending the POST to reading the reply's first delta, one message at a time."""
    user_id, token = probe
    socket = WebsocketConnection(subscription_url(web_url, user_id, token))
    latencies = []
    try:
        with httpx.Client(base_url=web_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            for index in range(samples):
                body = {"clientMessageId": str(uuid.uuid4()), "text": f"probe {index}"}
                started = time.perf_counter()
                http.post("/api/v1/conversation/messages", json=body).raise_for_status()
                _next_event_of(socket, {"text.delta"})
                latencies.append(time.perf_counter() - started)
                _next_event_of(socket, {"run.completed", "run.failed"})
    finally:
        socket.close()
    return latencies


@contextlib.contextmanager
def idle_subscribers(web_url: str, users: list[tuple[int, str]]):
    """One open, subscribed websocket per user's Main Chat, held for the duration."""
    sockets = []
    try:
        for user_id, token in users:
            sockets.append(WebsocketConnection(subscription_url(web_url, user_id, token)))
        yield
    finally:
        for socket in sockets:
            socket.abort()


def echo_round_trips(stack: Stack, samples: int) -> list[float]:
    server, echo_url = start_web(stack, "bench.echo_asgi:application")
    try:
        socket = WebsocketConnection(f"{echo_url.replace('http://', 'ws://')}/echo/")
        latencies = []
        for index in range(samples + 10):
            started = time.perf_counter()
            socket.send_json({"index": index})
            socket.receive_json(timeout=10)
            if index >= 10:  # the first round trips warm the layer's connections
                latencies.append(time.perf_counter() - started)
        socket.close()
        return latencies
    finally:
        server.stop()


def measure(stack: Stack, web_url: str, probe: tuple[int, str], idle: list[tuple[int, str]], *, samples: int) -> Figure:
    first_delta_latencies(web_url, probe, 3)  # warm-up: agent and session creation happen once per conversation
    with idle_subscribers(web_url, idle):
        latencies = first_delta_latencies(web_url, probe, samples)
    echo = echo_round_trips(stack, samples * 5)
    median, p95 = median_and_p95(latencies)
    echo_median, echo_p95 = median_and_p95(echo)
    return Figure(
        f"POST → first text.delta, {len(idle)} other subscribed conversations (median)",
        median * 1000,
        "ms",
        baseline_name="bare Channels echo round trip (median)",
        baseline=echo_median * 1000,
        higher_is_better=False,
        notes=[f"p95 {p95 * 1000:.1f} ms; echo p95 {echo_p95 * 1000:.2f} ms"],
    )
