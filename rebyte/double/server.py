"""HTTP surface of the Rebyte double: the Agents API paths the `openai` SDK calls (see rebyte/README.md)."""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import random
import re
import select
import socket
import string
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rebyte.double.agent import EchoAgent
from rebyte.double.errors import ApiError
from rebyte.double.faults import Fault
from rebyte.double.resources import Config, new_id
from rebyte.double.store import Store

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
# How often a quiet live stream looks whether its client has gone.
CLIENT_GONE_CHECK_SECONDS = 0.2
# Stream obfuscation pads each event with this many random alphanumeric characters (the length hides the size).
PADDING_LENGTHS = (8, 64)
_PADDING_ALPHABET = string.ascii_letters + string.digits
_AGENT = r"(?P<agent_id>agent_[0-9a-f]+)"
_SESSION = r"(?P<session_id>sess_[0-9a-f]+)"
_TURN = r"(?P<turn_id>turn_[0-9a-f]+)"

# (method, path pattern, operation). POST …/events is named by its event kind when it is matched.
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (method, re.compile(pattern), op)
    for method, pattern, op in (
        ("POST", r"/v1/agents", "create_agent"),
        ("GET", r"/v1/agents", "list_agents"),
        ("POST", r"/v1/agents/sessions", "create_session"),
        ("GET", r"/v1/agents/sessions", "list_sessions"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}", "get_session"),
        ("DELETE", rf"/v1/agents/sessions/{_SESSION}", "delete_session"),
        ("POST", rf"/v1/agents/sessions/{_SESSION}/events", "input"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}/events", "session_events"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}/turns", "list_turns"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}/turns/{_TURN}", "get_turn"),
        ("GET", rf"/v1/agents/sessions/{_SESSION}/items", "list_items"),
        ("GET", rf"/v1/agents/{_AGENT}", "get_agent"),
        ("DELETE", rf"/v1/agents/{_AGENT}", "delete_agent"),
    )
]
_INPUT_OPS = {
    "agent.session.input.message": "input_message",
    "agent.session.input.tool_result": "input_tool_result",
    "agent.session.input.cancel": "input_cancel",
}


class DoubleServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], store: Store, keepalive_seconds: float = 15.0):
        super().__init__(address, Handler)
        self.store = store
        self.agent = EchoAgent(store)
        self.keepalive_seconds = keepalive_seconds


def build_server(host: str, port: int, *, config: Config, keepalive_seconds: float) -> DoubleServer:
    return DoubleServer((host, port), Store(config), keepalive_seconds)


class _Dropped(Exception):
    """The handler deliberately sent nothing and closed the connection (a fault)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes: with Nagle's algorithm the body waits for the client's delayed
    # ACK of the headers, 40 ms on every keep-alive answer.
    disable_nagle_algorithm = True
    server: DoubleServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

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
                    if op == "input":
                        op = _input_op(body)
                    self.server.store.record_request(op, self._log_entry(method, url.path, query, body))
                    self._authenticate()
                    self._operation(op, match.groupdict(), query, body)
                    return
            raise ApiError(404, "route_not_found", f"No route {method} {url.path}", "not_found_error")
        except ApiError as exc:
            self._send_json(exc.status, exc.body())
        except _Dropped:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _log_entry(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> dict[str, Any]:
        return {
            "method": method,
            "path": path,
            "query": {key: values[-1] for key, values in query.items()},
            "headers": {
                name: self.headers.get(name)
                for name in ("OpenAI-Beta", "Idempotency-Key", "Accept", "Content-Type")
                if self.headers.get(name) is not None
            },
            "authorized": (self.headers.get("Authorization") or "").startswith("Bearer "),
            "body": body,
        }

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(413, "request_too_large", "The request body is too large")
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
        # The Agents API is a beta surface: every call names it (the SDK sends this header itself).
        if self.headers.get("OpenAI-Beta") != "agents=v1":
            raise ApiError(400, "missing_beta_header", "Send OpenAI-Beta: agents=v1", param="OpenAI-Beta")

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", self.request_id)
        self.end_headers()
        self.wfile.write(data)

    def _send_accepted(self) -> None:
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.send_header("X-Request-Id", self.request_id)
        self.end_headers()

    def _drop(self) -> None:
        # Closing both directions makes the client see a connection that ended without any response.
        self.connection.shutdown(socket.SHUT_RDWR)
        raise _Dropped

    # --- provider API ------------------------------------------------------------------------------------

    def _operation(self, op: str, params: dict[str, str], query: dict[str, list[str]], body: Any) -> None:
        fault = self.server.store.faults.take(op)
        if fault is not None and fault.mode == "http_error":
            raise ApiError(fault.status, "injected_fault", f"Injected {fault.status} for {op}", "server_error")
        if fault is not None and fault.mode == "delay":
            time.sleep(fault.delay_ms / 1000)
        if op == "session_events":
            self._live_events(params["session_id"], query, fault)
            return
        store = self.server.store
        if op.startswith("input_"):
            turn = store.accept_events(params["session_id"], body, self.headers.get("Idempotency-Key"))
            if turn is not None:
                self.server.agent.start(turn)
            if fault is not None and fault.mode == "drop_response":
                self._drop()
            self._send_accepted()
            return
        if op == "create_session":
            if self.headers.get("Idempotency-Key"):
                logger.debug("ignoring Idempotency-Key on a session create: creates are not idempotent")
            payload, turn, created_stream = store.create_session(body)
            self.server.agent.start(turn)
            if created_stream is not None:
                if fault is not None and fault.mode == "drop_response":  # created, and no event of it sent
                    store.unsubscribe(payload["id"], created_stream)
                    self._drop()
                obfuscated = (body.get("stream_options") or {}).get("include_obfuscation", True)
                self._send_events(payload["id"], created_stream, fault, obfuscated=obfuscated)
                return
        else:
            readers = {
                "create_agent": lambda: store.create_agent(body),
                "get_agent": lambda: store.get_agent(params["agent_id"]),
                "list_agents": lambda: store.list_agents(query),
                "delete_agent": lambda: store.delete_agent(params["agent_id"]),
                "delete_session": lambda: store.delete_session(params["session_id"]),
                "get_session": lambda: store.get_session(params["session_id"]),
                "list_sessions": lambda: store.list_sessions(query),
                "list_turns": lambda: store.list_turns(params["session_id"], query),
                "get_turn": lambda: store.get_turn(params["session_id"], params["turn_id"]),
                "list_items": lambda: store.list_items(params["session_id"], query),
            }
            payload = readers[op]()
        if fault is not None and fault.mode == "drop_response":
            self._drop()
        self._send_json(200, payload)

    def _live_events(self, session_id: str, query: dict[str, list[str]], fault: Fault | None) -> None:
        """Session-wide Server-Sent Events, live only: no replay, no cursor, never ended by the server."""
        unknown = sorted(set(query) - {"include_obfuscation"})
        if unknown:
            raise ApiError(400, "unknown_parameter", f"Unknown parameter: {unknown[0]}", param=unknown[0])
        obfuscation = query.get("include_obfuscation", ["true"])[-1]
        if obfuscation not in ("true", "false"):
            message = "include_obfuscation is true or false"
            raise ApiError(400, "invalid_parameter", message, param="include_obfuscation")
        if "text/event-stream" not in (self.headers.get("Accept") or ""):
            raise ApiError(406, "not_acceptable", "This endpoint answers text/event-stream only")
        subscriber = self.server.store.subscribe(session_id)
        self._send_events(session_id, subscriber, fault, obfuscated=obfuscation == "true", greeting=b": connected\n\n")

    def _send_events(
        self, session_id: str, subscriber: queue.Queue, fault: Fault | None, *, obfuscated: bool, greeting=b""
    ) -> None:
        """Writes a session's events from `subscriber` as Server-Sent Events until the client leaves or the stream is
        cut (a fault, a scenario, a reset), the way a live stream does; a streamed create answers the same way.
        Obfuscated (the default upstream), each event carries random padding, as the SDK's types describe."""
        store = self.server.store
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
            if greeting:
                self._chunk(greeting)
            quiet_since = time.monotonic()
            while True:
                if sent == cut_after:
                    self._drop()
                try:
                    event = subscriber.get(timeout=CLIENT_GONE_CHECK_SECONDS)
                except queue.Empty:
                    if self._client_gone():
                        return
                    if time.monotonic() - quiet_since >= self.server.keepalive_seconds:
                        self._chunk(b": keepalive\n\n")
                        quiet_since = time.monotonic()
                    continue
                if event is None:  # cut (a scenario, a reset): end as abruptly as a lost connection
                    self._drop()
                if obfuscated:
                    event = {**event, "obfuscation": _padding()}
                self._chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                sent += 1
                quiet_since = time.monotonic()
        except (BrokenPipeError, ConnectionResetError, OSError):
            logger.debug("event stream client for %s went away", session_id)
        finally:
            store.unsubscribe(session_id, subscriber)

    def _client_gone(self) -> bool:
        """True once the client closed its end (it sends nothing on a live stream, so readable means EOF): noticed
        between events, as a server's event loop would, not only at the next write."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # --- test knobs --------------------------------------------------------------------------------------

    def _admin(self, method: str, path: str, body: Any) -> None:
        store = self.server.store
        if (method, path) == ("GET", "/_double/health"):
            self._send_json(200, {"ok": True})
        elif (method, path) == ("GET", "/_double/state"):
            self._send_json(200, store.admin_state())
        elif (method, path) == ("GET", "/_double/requests"):
            self._send_json(200, {"requests": store.request_log_snapshot()})
        elif (method, path) == ("POST", "/_double/reset"):
            store.reset()
            self._send_json(200, {"ok": True})
        elif (method, path) == ("POST", "/_double/faults"):
            self._send_json(201, dataclasses.asdict(store.faults.arm(body)))
        elif (method, path) == ("DELETE", "/_double/faults"):
            self._send_json(200, {"disarmed": store.faults.disarm()})
        elif (method, path) == ("POST", "/_double/config"):
            self._send_json(200, dataclasses.asdict(store.configure(body)))
        else:
            raise ApiError(404, "route_not_found", f"No route {method} {path}", "not_found_error")


def _padding() -> str:
    return "".join(random.choices(_PADDING_ALPHABET, k=random.randint(*PADDING_LENGTHS)))


def _input_op(body: Any) -> str:
    events = body.get("events") if isinstance(body, dict) else None
    first = events[0] if isinstance(events, list) and events and isinstance(events[0], dict) else {}
    return _INPUT_OPS.get(first.get("type"), "input_message")
