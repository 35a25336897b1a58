"""POST → first `text.delta` on the conversation's socket, with Impo's own share apart from the provider's: the
provider's share is its turn's start → its first delta, as a subscriber of the double's own live stream sees them
(the double paces its first delta 20 ms after the turn starts, like a fast model)."""

import threading
import time
import uuid

from bench.harness import Figure, median_and_p95
from bench.worker_host import start_host
from devtools.stack import Stack, start_web
from devtools.websocket import WebsocketConnection


def watch_turn(stack: Stack, session_id: str, seen: dict, ready: threading.Event) -> None:
    """When the double started the next turn and emitted its first delta, seen by a subscriber of its own (a sample
    whose subscription broke is not counted)."""
    from rebyte.failures import ProviderError

    try:
        with stack.double.gateway() as gateway, gateway.live_events(session_id) as events:
            ready.set()
            for event in events:
                if event.type in ("agent.session.turn.created", "agent.session.turn.output_text.delta"):
                    seen.setdefault(event.type, time.monotonic())
                if event.type.startswith("agent.session.turn.") and event.type.endswith(("completed", "failed")):
                    return
    except ProviderError:
        seen.clear()
    finally:
        ready.set()


def measure(stack: Stack, user: tuple[int, str], samples: int) -> list[Figure]:
    """One message at a time on an idle worker host; the first two (the agent's and session's creation, a warm-up)
    are not counted."""
    import httpx

    from bench.stream import subscription_url
    from rebyte.models import RemoteSession

    web, web_url = start_web(stack, name="inflight-first-web")
    host = start_host(stack)
    totals, providers = [], []
    try:
        stack.double.configure(delta_delay_ms=20, delta_chunks=4)
        with httpx.Client(base_url=web_url, headers={"Authorization": f"Bearer {user[1]}"}, timeout=30) as http:
            for index in range(samples + 2):  # the first creates the agent and the session, the second warms
                session = RemoteSession.objects.filter(conversation__owner_id=user[0], state="current").first()
                seen, ready = {}, threading.Event()
                watcher = None
                if session is not None:
                    watcher = threading.Thread(target=watch_turn, args=(stack, session.remote_id, seen, ready))
                    watcher.start()
                    ready.wait(30)
                socket = WebsocketConnection(subscription_url(web_url, *user))
                try:
                    started = time.monotonic()
                    body = {"clientMessageId": str(uuid.uuid4()), "text": f"first delta {index}"}
                    http.post("/api/v1/conversation/messages", json=body).raise_for_status()
                    while socket.receive_json(timeout=30)["type"] != "text.delta":
                        pass
                    total = time.monotonic() - started
                    while socket.receive_json(timeout=30)["type"] not in ("run.completed", "run.failed"):
                        pass
                finally:
                    socket.close()
                if watcher is not None:
                    watcher.join(timeout=30)
                if index >= 2 and len(seen) == 2:
                    totals.append(total)
                    providers.append(seen["agent.session.turn.output_text.delta"] - seen["agent.session.turn.created"])
    finally:
        host.stop()
        web.stop()
    own = [total - provider for total, provider in zip(totals, providers, strict=True)]
    own_median, own_p95 = median_and_p95(own)
    total_median, total_p95 = median_and_p95(totals)
    return [
        Figure(
            "POST → first text.delta on the socket, Impo's own share (median)",
            own_median * 1000,
            "ms",
            higher_is_better=False,
            notes=[
                f"own share p95 {own_p95 * 1000:.0f} ms; whole POST → first delta median {total_median * 1000:.0f} ms, "
                f"p95 {total_p95 * 1000:.0f} ms; the provider's share (its turn's start → its first delta, paced "
                f"20 ms) median {1000 * median_and_p95(providers)[0]:.0f} ms; {len(own)} samples"
            ],
        )
    ]
