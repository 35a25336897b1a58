"""Refusals a client can repeat by the thousand (401 authentication failures, 429 rate limits, sockets refused
before their handshake) are summarised: the first of an interval is written as usual (at INFO,
core/log_levels.py), the rest are counted and written as one line per client and route when the interval
ends, e.g.

    INFO impo.client_errors 41 more 429 answers to user 7 on api/v1/tasks in the last 60 s (rate limited)

A client that keeps failing therefore costs its first line and one summary per interval, whatever its rate, and a
flood that stops still has its summary written: a thread of the process writes the summaries every interval (also
when no request comes any more), and a web process writes them once more when it stops (impo/web_server.py). At
most `max_keys` clients and routes are kept per interval; a flood from more addresses than that (spoofed or many)
is counted together, in one more line, so the log and the memory stay bounded. docs/operations.md "Logs" lists the
lines.
"""

import logging
import os
import re
import threading
import time
import weakref
from collections import Counter

from django.utils.functional import empty

# Django's answers summarised; any other 4xx is a line each.
SUMMARISED_ANSWERS = (401, 429)
# What each summarised status means, said in its line (403: a socket's refusal only).
MEANINGS = {401: "authentication failed", 429: "rate limited", 403: "socket refused before its handshake"}
# uvicorn's line for a socket the application closed before accepting it: a missing or wrong token, or a conversation
# that is not the user's (runtime/realtime/consumers.py). Its arguments are the client's "address:port" and the path.
SOCKET_REFUSAL = '%s - "WebSocket %s" 403'
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
summary_logger = logging.getLogger("impo.client_errors")

# Every filter made by the logging configuration, for `flush_all`.
_filters: weakref.WeakSet = weakref.WeakSet()

OVERFLOW_CLIENT = "other clients"
OVERFLOW_ROUTE = "any route"


def _client(request) -> str:
    """The user the request authenticated as, else its address. Never evaluates a lazy user (that would read the
    session, from a logging call that may run anywhere)."""
    user = request.__dict__.get("user")
    user = getattr(user, "_wrapped", user)
    if user is not None and user is not empty and getattr(user, "is_authenticated", False):
        return f"user {user.pk}"
    return f"address {request.META.get('REMOTE_ADDR') or 'unknown'}"


def _route(request) -> str:
    """The URL pattern, not the path: ids in a path would make every request a key of its own."""
    match = getattr(request, "resolver_match", None)
    return (match.route if match is not None else "") or "an unrouted path"


def _refusal(record: logging.LogRecord) -> tuple[int, str, str] | None:
    """(status, client, route) of a refusal to summarise, or None for any other record."""
    status = getattr(record, "status_code", None)
    request = getattr(record, "request", None)
    if status in SUMMARISED_ANSWERS and request is not None:
        return status, _client(request), _route(request)
    if record.msg == SOCKET_REFUSAL and isinstance(record.args, tuple) and len(record.args) == 2:
        address, path = (str(arg) for arg in record.args)
        # The path without its query (a token may be there), its ids as <id>.
        route = _UUID.sub("<id>", path.partition("?")[0])
        return 403, f"address {address.rpartition(':')[0] or address}", f"websocket {route}"
    return None


def _echoes_a_refused_socket(record: logging.LogRecord) -> bool:
    """The websockets library's line after uvicorn's for the same refused socket, with neither its address nor its
    path: never written (uvicorn's line, or its summary, says it all)."""
    return record.msg == "connection rejected (%d %s)" and isinstance(record.args, tuple) and record.args[:1] == (403,)


class RepeatedRefusals(logging.Filter):
    """A filter of the `django.request` logger (and of uvicorn's, for refused sockets): passes the first 401, 429
    or refused socket per client and route in an interval and counts the others for the summary line."""

    def __init__(self, interval: float = 60.0, max_keys: int = 100):
        super().__init__()
        self.interval = interval
        self.max_keys = max_keys
        # Every key seen this interval, with how many of its records were held back (0: only its first, passed).
        self._held: Counter = Counter()
        self._lock = threading.Lock()
        self._flusher_pid = None
        _filters.add(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if _echoes_a_refused_socket(record):
            return False
        key = _refusal(record)
        if key is None:
            return True
        status = key[0]
        with self._lock:
            self._start_flusher()
            if key not in self._held and len(self._held) >= self.max_keys:
                key = (status, OVERFLOW_CLIENT, OVERFLOW_ROUTE)
                self._held[key] += 1
                return False
            if key in self._held:
                self._held[key] += 1
                return False
            self._held[key] = 0
            return True

    def _start_flusher(self) -> None:
        # Per process: a web process is forked from gunicorn's master, and a thread does not survive a fork.
        if self._flusher_pid == os.getpid():
            return
        self._flusher_pid = os.getpid()
        threading.Thread(target=self._flush_every_interval, name="refusal-summaries", daemon=True).start()

    def _flush_every_interval(self) -> None:
        while True:
            time.sleep(self.interval)
            self.flush()

    def flush(self) -> None:
        """Writes a line per key with records held back; a key that had none is forgotten, so its next record is
        written again as a first."""
        with self._lock:
            held, self._held = self._held, Counter({key: 0 for key, count in self._held.items() if count})
        for (status, client, route), count in sorted(held.items()):
            if count:
                summary_logger.info(
                    "%d more %d answers to %s on %s in the last %g s (%s)",
                    count,
                    status,
                    client,
                    route,
                    self.interval,
                    MEANINGS[status],
                )


def flush_all() -> None:
    """Writes what every filter holds back now (a process about to exit)."""
    for refusals in list(_filters):
        refusals.flush()
