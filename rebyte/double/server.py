"""HTTP surface of the Rebyte double (see rebyte/README.md for the contract)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rebyte.double.agent import EchoAgent
from rebyte.double.state import TERMINAL_STATUSES, ApiError, Config, Fault, Store, new_id

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
_AGENT = r"(?P<agent_id>agent_[0-9a-f]+)"
_SESSION = r"(?P<session_id>sess_[0-9a-f]+)"
_TURN = r"(?P<turn_id>turn_[0-9a-f]+)"

# (method, path pattern, operation name). Operation names key faults and request counts.
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (method, re.compile(pattern), op)
    for method, pattern, op in (
        ("POST", r"/v1/agents", "create_agent"),
        ("GET", r"/v1/agents", "list_agents"),
        ("POST", r"/v1/agents/sessions", "create_session"),
        ("GET", r"/v1/agents/sessions", "list_sessions"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}", "get_session"),
        ("POST", rf"/v1/agents/sessions/{_SESSION}/turns", "create_turn"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}/turns", "list_turns"),
        ("GET", rf"/v1/agents/turns/{_TURN}", "get_turn"),
        ("POST", rf"/v1/agents/turns/{_TURN}/cancel", "cancel_turn"),
        ("POST", rf"/v1/agents/turns/{_TURN}/function_call_outputs", "submit_function_call_output"),
        ("GET", rf"/v1/agents/turns/{_TURN}/events", "turn_events"),
        ("GET", rf"/v1/agents/{_AGENT}", "get_agent"),
    )
]


class DoubleServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], store: Store, keepalive_seconds: float = 15.0):
        super().__init__(address, Handler)
        self.store = store
        self.agent = EchoAgent(store)
        self.keepalive_seconds = keepalive_seconds


def build_server(
    host: str, port: int, *, state_file: Path | None, config: Config, keepalive_seconds: float
) -> DoubleServer:
    return DoubleServer((host, port), Store(config, state_file), keepalive_seconds)


class _Dropped(Exception):
    """The handler deliberately sent nothing and closed the connection (a fault)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DoubleServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    # --- plumbing ----------------------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        self.request_id = new_id("req")
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            # Read the body first so an early error still leaves the keep-alive connection in sync.
            body = self._read_body() if method == "POST" else None
            if url.path.startswith("/_double/"):
                self._admin(method, url.path, body)
                return
            for route_method, pattern, op in ROUTES:
                match = pattern.fullmatch(url.path)
                if match and route_method == method:
                    self._authenticate()
                    self._operation(op, match.groupdict(), query, body)
                    return
            raise ApiError(404, "route_not_found", f"No route {method} {url.path}", "not_found_error")
        except ApiError as exc:
            self._send_json(exc.status, exc.body())
        except _Dropped:
            self.close_connection = True

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(413, "body_too_large", "The request body is too large")
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ApiError(400, "invalid_json", "The request body is not valid JSON") from None

    def _authenticate(self) -> None:
        scheme, _, key = (self.headers.get("Authorization") or "").partition(" ")
        if scheme != "Bearer" or not key.strip():
            raise ApiError(401, "invalid_api_key", "Send Authorization: Bearer <api key>", "authentication_error")

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", self.request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        # Closing both directions makes the client see a connection that ended without any response.
        self.connection.shutdown(socket.SHUT_RDWR)
        raise _Dropped

    # --- provider API ------------------------------------------------------------------------------------

    def _operation(self, op: str, params: dict[str, str], query: dict[str, list[str]], body: Any) -> None:
        fault = self.server.store.take_fault(op)
        if fault is not None and fault.mode == "http_error":
            raise ApiError(fault.status, "injected_fault", f"Injected {fault.status} for {op}", "server_error")
        if fault is not None and fault.mode == "delay":
            time.sleep(fault.delay_ms / 1000)
        if op == "turn_events":
            self._turn_events(params["turn_id"], query, fault)
            return
        status, payload, headers = self._act(op, params, query, body)
        if fault is not None and fault.mode == "drop_response":
            self._drop()
        self._send_json(status, payload, headers)

    def _act(
        self, op: str, params: dict[str, str], query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        store = self.server.store
        key = self.headers.get("Idempotency-Key") or None
        creators: dict[str, Callable[[], tuple[dict[str, Any], bool]]] = {
            "create_agent": lambda: store.create_agent(body, key),
            "create_session": lambda: store.create_session(body, key),
            "create_turn": lambda: store.create_turn(params.get("session_id", ""), body, key),
        }
        if op in creators:
            obj, created = creators[op]()
            if op == "create_turn" and created:
                self.server.agent.start(obj["id"])
            # A replayed create answers 200 with the original object, like Stripe-style idempotency.
            return (201, obj, {}) if created else (200, obj, {"Idempotent-Replayed": "true"})
        readers: dict[str, Callable[[], dict[str, Any]]] = {
            "get_agent": lambda: store.get_agent(params["agent_id"]),
            "list_agents": lambda: store.list_agents(query),
            "get_session": lambda: store.get_session(params["session_id"]),
            "list_sessions": lambda: store.list_sessions(query),
            "get_turn": lambda: store.get_turn(params["turn_id"]),
            "list_turns": lambda: store.list_turns(params["session_id"], query),
            "cancel_turn": lambda: store.cancel_turn(params["turn_id"]),
            "submit_function_call_output": lambda: store.submit_output(params["turn_id"], body),
        }
        return 200, readers[op](), {}

    def _turn_events(self, turn_id: str, query: dict[str, list[str]], fault: Fault | None) -> None:
        store = self.server.store
        raw_after = query.get("after", [self.headers.get("Last-Event-ID") or "0"])[-1]
        if not raw_after.isdigit():
            raise ApiError(400, "invalid_parameter", "after must be a non-negative integer")
        after = int(raw_after)
        accept = self.headers.get("Accept", "")
        if "application/json" in accept and "text/event-stream" not in accept:
            events, status = store.events_after(turn_id, after)
            self._send_json(200, {"object": "list", "data": events, "turn_status": status})
            return
        store.get_turn(turn_id)  # a 404 must be an ordinary JSON error, before the stream starts
        self._stream(turn_id, after, fault)

    def _stream(self, turn_id: str, after: int, fault: Fault | None) -> None:
        """Server-Sent Events, chunk-encoded so that a cut stream is distinguishable from a finished one."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Request-Id", self.request_id)
        self.end_headers()
        self.close_connection = True
        cut_after = fault.after_events if fault is not None and fault.mode == "cut_stream" else None
        sent = 0
        try:
            while True:
                try:
                    events, status = self.server.store.events_after(turn_id, after, self.server.keepalive_seconds)
                except ApiError:  # the turn vanished (an admin reset): end as abruptly as a lost connection
                    self._drop()
                finished = status in TERMINAL_STATUSES
                if not events and not finished:
                    self._chunk(b": keepalive\n\n")
                    continue
                for event in events:
                    if sent == cut_after:
                        self._drop()
                    frame = f"id: {event['sequence']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n"
                    self._chunk(frame.encode())
                    sent += 1
                    after = event["sequence"]
                if finished:
                    self.wfile.write(b"0\r\n\r\n")
                    return
        except (BrokenPipeError, ConnectionResetError):
            logger.debug("event stream client for %s went away", turn_id)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")

    # --- test knobs --------------------------------------------------------------------------------------

    def _admin(self, method: str, path: str, body: Any) -> None:
        store = self.server.store
        if (method, path) == ("GET", "/_double/health"):
            self._send_json(200, {"ok": True})
        elif (method, path) == ("GET", "/_double/state"):
            self._send_json(200, store.admin_state())
        elif (method, path) == ("POST", "/_double/reset"):
            store.reset()
            self._send_json(200, {"ok": True})
        elif (method, path) == ("POST", "/_double/faults"):
            self._send_json(201, dataclasses.asdict(store.add_fault(body)))
        elif (method, path) == ("POST", "/_double/config"):
            self._send_json(200, dataclasses.asdict(store.configure(body)))
        else:
            raise ApiError(404, "route_not_found", f"No route {method} {path}", "not_found_error")
