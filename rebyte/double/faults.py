"""The faults a test arms through `POST /_double/faults` (and ends through `DELETE /_double/faults`): which operations
they hit, how, and for how long."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any

from rebyte.double.errors import ApiError
from rebyte.double.resources import new_id

# Operation names key faults and request counts. An input event's operation is named by its kind.
OPERATIONS = frozenset(
    {
        "create_agent",
        "get_agent",
        "list_agents",
        "delete_agent",
        "create_session",
        "get_session",
        "list_sessions",
        "delete_session",
        "input_message",
        "input_tool_result",
        "input_cancel",
        "list_turns",
        "get_turn",
        "list_items",
        "session_events",
    }
)
# The operations that may answer with an event stream (a session create asked with `stream: true`).
STREAMING_OPERATIONS = frozenset({"session_events", "create_session"})
FAULT_MODES = frozenset({"drop_response", "delay", "http_error", "cut_stream"})


@dataclass
class Fault:
    id: str
    op: str
    mode: str
    times: int = 1
    status: int = 503
    delay_ms: int = 0
    after_events: int = 0
    # When set, the fault applies to every request of `op` until this (monotonic) time instead of `times`.
    until: float | None = None
    # Applies to every request of `op` until a test ends it (`DELETE /_double/faults`), however long that takes.
    until_ended: bool = False
    hits: int = 0

    @property
    def counted(self) -> bool:
        """Spent request by request (`times`), not lasting for a while or until ended."""
        return self.until is None and not self.until_ended

    def lasts(self, now: float) -> bool:
        if self.counted:
            return self.times > 0
        return self.until_ended or self.until > now


class Faults:
    """The armed faults, guarded by the store's lock (a reset clears them with everything else)."""

    def __init__(self, lock: threading.Condition):
        self._lock = lock
        self._armed: list[Fault] = []

    def clear(self) -> None:
        self._armed = []

    def disarm(self) -> int:
        """Ends every armed fault now: an outage a test ends when it has seen what the outage shows, not on a clock
        that a loaded machine can outrun."""
        with self._lock:
            disarmed = len(self._armed)
            self.clear()
        return disarmed

    def arm(self, body: dict[str, Any]) -> Fault:
        op, mode = body.get("op"), body.get("mode")
        if op not in OPERATIONS and op != "*":
            raise ApiError(400, "invalid_fault", f"op must be '*' or one of {sorted(OPERATIONS)}")
        if mode not in FAULT_MODES:
            raise ApiError(400, "invalid_fault", f"mode must be one of {sorted(FAULT_MODES)}")
        if mode == "cut_stream" and op not in STREAMING_OPERATIONS:
            raise ApiError(400, "invalid_fault", f"cut_stream applies to {sorted(STREAMING_OPERATIONS)} only")
        seconds, until_ended = body.get("seconds"), body.get("until_ended", False)
        if not isinstance(until_ended, bool) or (until_ended and seconds is not None):
            raise ApiError(400, "invalid_fault", "until_ended is true or false, and a fault until ended has no seconds")
        fault = Fault(
            id=new_id("fault"),
            op=op,
            mode=mode,
            times=int(body.get("times", 1)),
            status=int(body.get("status", 503)),
            delay_ms=int(body.get("delay_ms", 0)),
            after_events=int(body.get("after_events", 0)),
            until=time.monotonic() + float(seconds) if seconds is not None else None,
            until_ended=until_ended,
        )
        with self._lock:
            self._armed.append(fault)
        return fault

    def take(self, op: str) -> Fault | None:
        """The fault this request of `op` meets, if any, counted as spent."""
        with self._lock:
            now = time.monotonic()
            self._armed = [fault for fault in self._armed if fault.lasts(now)]
            for fault in self._armed:
                if fault.op in (op, "*"):
                    if fault.counted:
                        fault.times -= 1
                    fault.hits += 1
                    return fault
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dataclasses.asdict(f) for f in self._armed]
