"""A webhook receiver for tests: a real HTTP server on a loopback port, started and stopped at will."""

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def delivery_id(self) -> str:
        return self.headers["Impo-Webhook-Id"]

    def json(self) -> dict:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        """The check docs/api.md "Webhooks" tells receivers to make, written here independently of the sender's code."""
        timestamp = self.headers["Impo-Webhook-Timestamp"]
        expected = hmac.new(secret.encode(), timestamp.encode() + b"." + self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers["Impo-Webhook-Signature"], f"v1={expected}")


class Receiver:
    """Answers each request with the next of `statuses` (the last one repeats), recording what arrived; a redirect
    status points at `location`."""

    def __init__(self, port: int, statuses: tuple[int, ...] = (204,), *, location: str | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}/hooks/impo"
        self.statuses = list(statuses)
        self.location = location
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Received(dict(self.headers.items()), body))
                    status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                if receiver.location and 300 <= status < 400:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def requests(self) -> list[Received]:
        with self._lock:
            return list(self.received)
