"""Outage lines operators can watch: one WARNING when a condition starts and one when it ends, never one per failed
attempt, and no traceback for what an outage is expected to raise (a connection lost, refused or timed out).

During a 15 s Redis stop a web process left one chained traceback per unsent hint and each worker its heartbeat's
failure every 3 s, burying the lines docs/edge.md tells operators to watch."""

import logging
import threading

import kombu.exceptions
import redis

# What losing Redis or the broker raises, at the bottom of whatever a client library chains on top of it.
CONNECTION_LOSS = (OSError, TimeoutError, redis.ConnectionError, redis.TimeoutError, kombu.exceptions.OperationalError)


def is_connection_loss(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from or while handling, is a lost connection."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CONNECTION_LOSS):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class Condition:
    """A condition that starts and ends (Redis unreachable from one loop, say), logged once each way."""

    def __init__(self, logger: logging.Logger, *, started: str, ended: str):
        self._logger = logger
        self._started = started
        self._ended = ended
        self._lock = threading.Lock()
        self._failures = 0

    def failed(self, exc: BaseException) -> None:
        """One failed attempt: logged if it starts the condition (with a traceback only if it is not a lost
        connection, which would be a bug rather than an outage)."""
        with self._lock:
            self._failures += 1
            first = self._failures == 1
        if first:
            self._logger.warning(
                "%s: %s: %s", self._started, type(exc).__name__, exc, exc_info=not is_connection_loss(exc)
            )

    def succeeded(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, 0
        if failures:
            self._logger.warning("%s (after %d failed attempts)", self._ended, failures)
