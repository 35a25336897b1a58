"""What a chaos client is made of: requests retried through the outages the run causes, as a client would, and a
websocket watcher that records what the client saw of a conversation."""

import random
import threading
import time

import httpx

from devtools.records import SETTLED_STATES, Connection, ConversationRecord
from devtools.stack import wait_until
from devtools.websocket import Closed, Refused, WebsocketConnection

# A client retries what an outage of the stack answered (a lost connection, 502-504) with the same body for this long.
CLIENT_RETRY_SECONDS = 120.0


def request(http: httpx.Client, method: str, path: str, body: dict | None = None) -> httpx.Response:
    """A client's request through the outages the run causes: a lost connection or a 502-504 (a web process
    killed, PostgreSQL or Redis restarting) is sent again, the same body, as a client would."""
    give_up = time.monotonic() + CLIENT_RETRY_SECONDS
    while True:
        try:
            response = http.request(method, path, json=body)
            if response.status_code not in (502, 503, 504):
                return response
            outcome = f"{response.status_code}: {response.text[:200]}"
        except httpx.TransportError as exc:
            outcome = repr(exc)
        if time.monotonic() > give_up:
            raise AssertionError(f"{method} {path} still failing after {CLIENT_RETRY_SECONDS:.0f} s: {outcome}")
        time.sleep(0.5)  # pacing a client's retry, not waiting for a condition


def accepted(http: httpx.Client, method: str, path: str, body: dict | None = None, *, status: int = 202) -> dict:
    """The JSON of a command the stack must accept with `status`."""
    response = request(http, method, path, body)
    if response.status_code != status:
        raise AssertionError(f"{method} {path} {body} answered {response.status_code}: {response.text}")
    return response.json()


def settled_submission(http: httpx.Client, submission_id: str) -> dict:
    """The submission, polled until it has settled."""

    def settled():
        response = request(http, "GET", f"/api/v1/submissions/{submission_id}")
        return response.status_code == 200 and response.json()["status"] in SETTLED_STATES and response.json()

    return wait_until(settled, timeout=240, interval=0.2, what=f"submission {submission_id} to settle")


class SocketWatcher:
    """One client's view of a conversation over the websocket; reconnects when told to, from its last seq."""

    def __init__(self, ws_url: str, record: ConversationRecord, rng: random.Random):
        self._url = ws_url
        self._record = record
        self._rng = rng
        self._stop = threading.Event()
        self._reconnect = threading.Event()
        # Set before the client deletes the conversation: a refused reconnect is then the deletion, not an error.
        self._deleting = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name=f"ws-{record.index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def last_seq(self) -> int:
        with self._lock:
            return max(self._record.seen, default=0)

    def request_reconnect(self) -> None:
        self._reconnect.set()

    def expect_deletion(self) -> None:
        self._deleting.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _watch(self) -> None:
        while not self._stop.is_set():
            # A reconnecting client may ask for a little overlap; de-duplication by seq must cope.
            after = max(0, self.last_seq - self._rng.choice([0, 0, 1, 3]))
            try:
                socket = WebsocketConnection(f"{self._url}&after={after}")
            except (Closed, OSError):
                # The connection was lost before the handshake's answer (a web process killed under it), as an
                # HTTP request's is: tried again. Whether the socket caught up in the end is checked after the run.
                time.sleep(0.5)  # pacing a client's retry, not waiting for a condition
                continue
            except Refused as exc:
                if self._deleting.is_set():
                    return  # the conversation is gone: 404 on the socket too
                self._record.errors.append(f"websocket refused: {exc!r}")
                time.sleep(0.5)  # pacing a client's retry, not waiting for a condition
                continue
            connection = Connection(after=after)
            self._record.connections.append(connection)
            try:
                self._read(socket, connection)
            finally:
                socket.abort()
            if not connection.seqs and not self._reconnect.is_set():
                # The server closed it before any event (1013: PostgreSQL restarting): the client tries again.
                time.sleep(0.5)  # pacing a client's retry, not waiting for a condition
            self._reconnect.clear()

    def _read(self, socket: WebsocketConnection, connection: Connection) -> None:
        while not self._stop.is_set() and not self._reconnect.is_set():
            try:
                event = socket.receive_json(timeout=0.3)
            except TimeoutError:
                continue
            except Closed:
                return
            if "seq" not in event:
                # A notice, not an event of the log (`conversation.deleted`, then 4404): whether the deleted
                # conversation is closed on every route is checked after the run.
                continue
            connection.seqs.append(event["seq"])
            with self._lock:
                if event["seq"] in self._record.seen:
                    self._record.duplicates_seen += 1
                else:
                    self._record.seen[event["seq"]] = event


WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "ünïcode",
    "日本",
    "emoji🙂",
]
