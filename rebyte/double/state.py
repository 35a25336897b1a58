"""State of the Rebyte double: resources, idempotency records, fault knobs and the optional snapshot file.

Every read and write happens under one condition variable. Turn runners, event streams and HTTP handlers all
wait on it, so a change made by any of them (a delta, an output, a cancel) wakes the others at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TERMINAL_EVENT_STATUS = {
    "turn.completed": "completed",
    "turn.failed": "failed",
    "turn.cancelled": "cancelled",
}
TERMINAL_STATUSES = frozenset(TERMINAL_EVENT_STATUS.values())

# Operation names: used for fault matching and per-operation request counts.
OPERATIONS = frozenset(
    {
        "create_agent",
        "get_agent",
        "list_agents",
        "create_session",
        "get_session",
        "list_sessions",
        "create_turn",
        "get_turn",
        "list_turns",
        "cancel_turn",
        "submit_function_call_output",
        "turn_events",
    }
)
FAULT_MODES = frozenset({"drop_response", "delay", "http_error", "cut_stream"})

METADATA_MAX_KEYS = 16
METADATA_KEY_MAX = 64
METADATA_VALUE_MAX = 512
PAGE_LIMIT_DEFAULT = 20
PAGE_LIMIT_MAX = 100
_METADATA_PARAM = re.compile(r"metadata\[(.+)\]")


class ApiError(Exception):
    """An error the HTTP layer turns into `{"error": {...}}` with the given status."""

    def __init__(self, status: int, code: str, message: str, error_type: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.error_type = error_type

    def body(self) -> dict[str, Any]:
        return {"error": {"type": self.error_type, "code": self.code, "message": self.message}}


class TurnEnded(Exception):
    """Tells a turn runner that its turn reached a terminal state elsewhere (a cancel), so it must stop."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _now() -> int:
    return int(time.time())


@dataclass
class Config:
    delta_delay_ms: int = 20
    delta_chunks: int = 4


@dataclass
class Agent:
    id: str
    name: str
    model: str
    instructions: str | None
    metadata: dict[str, str]
    created_at: int
    idempotency_key: str | None

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "agent",
            "name": self.name,
            "model": self.model,
            "instructions": self.instructions,
            "metadata": self.metadata,
            "created_at": self.created_at,
        }


@dataclass
class Session:
    id: str
    agent_id: str
    metadata: dict[str, str]
    created_at: int
    idempotency_key: str | None


@dataclass
class FunctionCall:
    call_id: str
    item_id: str
    name: str
    arguments: str
    output: str | None = None
    # Every accepted submission, duplicates included, so tests can prove an output was sent exactly once.
    submissions: int = 0


@dataclass
class Turn:
    id: str
    session_id: str
    input_text: str
    tools: list[dict[str, Any]]
    metadata: dict[str, str]
    created_at: int
    idempotency_key: str | None
    status: str = "queued"
    items: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, FunctionCall] = field(default_factory=dict)
    output_text: str = ""
    error: dict[str, str] | None = None
    completed_at: int | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def required_actions(self) -> list[dict[str, Any]]:
        if self.status != "requires_action":
            return []
        return [
            {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
            for c in self.calls.values()
            if c.output is None
        ]

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "agent.session.turn",
            "session_id": self.session_id,
            "status": self.status,
            "input": self.input_text,
            "tools": self.tools,
            "metadata": self.metadata,
            "items": self.items,
            "output_text": self.output_text,
            "required_actions": self.required_actions(),
            "error": self.error,
            "last_sequence": len(self.events),
            "created_at": self.created_at,
            "completed_at": self.completed_at,
        }


@dataclass
class Fault:
    id: str
    op: str
    mode: str
    remaining: int
    status: int = 503
    delay_ms: int = 0
    after_events: int = 0


def _object(body: Any, *, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, Any]:
    # Unknown fields are rejected, as the real API does, so a client typo fails loudly instead of silently.
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "The request body must be a JSON object")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        raise ApiError(400, "unknown_parameter", f"Unknown parameter(s): {', '.join(unknown)}")
    missing = [name for name in required if name not in body]
    if missing:
        raise ApiError(400, "missing_parameter", f"Missing parameter(s): {', '.join(missing)}")
    return body


def _string(body: dict[str, Any], name: str, *, allow_empty: bool = False) -> str:
    value = body[name]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ApiError(400, "invalid_parameter", f"{name} must be a non-empty string")
    return value


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > METADATA_MAX_KEYS:
        raise ApiError(400, "invalid_metadata", f"metadata must be an object of at most {METADATA_MAX_KEYS} keys")
    for key, item in value.items():
        if not (0 < len(key) <= METADATA_KEY_MAX) or not isinstance(item, str) or len(item) > METADATA_VALUE_MAX:
            raise ApiError(400, "invalid_metadata", "metadata keys and values must be short strings")
    return dict(value)


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApiError(400, "invalid_tools", "tools must be a list")
    for tool in value:
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
            raise ApiError(400, "invalid_tools", "each tool must be {type: 'function', name, ...}")
    names = [tool["name"] for tool in value]
    if len(set(names)) != len(names):
        raise ApiError(400, "invalid_tools", "tool names must be unique")
    return value


def _fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _matches(metadata: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(metadata.get(key) == value for key, value in wanted.items())


def _page(
    records: list[Any],
    query: dict[str, list[str]],
    *,
    public,
    extra_filters: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One cursor page of `records` (in creation order) filtered by `metadata[key]=value` parameters."""
    wanted: dict[str, str] = {}
    options: dict[str, str] = {}
    allowed = {"limit", "after", "order", *(extra_filters or {})}
    for name, values in query.items():
        match = _METADATA_PARAM.fullmatch(name)
        if match:
            wanted[match.group(1)] = values[-1]
        elif name in allowed:
            options[name] = values[-1]
        else:
            raise ApiError(400, "unknown_parameter", f"Unknown query parameter {name!r}")
    try:
        limit = int(options.get("limit", PAGE_LIMIT_DEFAULT))
    except ValueError:
        raise ApiError(400, "invalid_parameter", "limit must be an integer") from None
    if not 1 <= limit <= PAGE_LIMIT_MAX:
        raise ApiError(400, "invalid_parameter", f"limit must be between 1 and {PAGE_LIMIT_MAX}")
    order = options.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "invalid_parameter", "order must be asc or desc")

    selected = [r for r in records if _matches(r.metadata, wanted)]
    for attribute, filter_name in (extra_filters or {}).items():
        if filter_name in options:
            selected = [r for r in selected if getattr(r, attribute) == options[filter_name]]
    if order == "desc":
        selected.reverse()
    if "after" in options:
        ids = [r.id for r in selected]
        if options["after"] not in ids:
            raise ApiError(400, "invalid_cursor", "after must be an id from a previous page of this list")
        selected = selected[ids.index(options["after"]) + 1 :]
    page = selected[:limit]
    return {
        "object": "list",
        "data": [public(r) for r in page],
        "first_id": page[0].id if page else None,
        "last_id": page[-1].id if page else None,
        "has_more": len(selected) > limit,
    }


class Store:
    def __init__(self, config: Config, state_file: Path | None = None):
        self.cond = threading.Condition()
        self._initial_config = config
        self._state_file = state_file
        self._clear()
        if state_file is not None and state_file.exists():
            self._load(state_file)

    def _clear(self) -> None:
        self.config = dataclasses.replace(self._initial_config)
        self.agents: dict[str, Agent] = {}
        self.sessions: dict[str, Session] = {}
        self.turns: dict[str, Turn] = {}
        # (operation, Idempotency-Key) -> (request fingerprint, id of the object created by the first request)
        self.idempotency: dict[tuple[str, str], tuple[str, str]] = {}
        self.faults: list[Fault] = []
        self.requests: Counter[str] = Counter()

    # --- persistence -------------------------------------------------------------------------------------

    def _load(self, path: Path) -> None:
        data = json.loads(path.read_text())
        self.agents = {a["id"]: Agent(**a) for a in data["agents"]}
        self.sessions = {s["id"]: Session(**s) for s in data["sessions"]}
        for raw in data["turns"]:
            calls = {cid: FunctionCall(**c) for cid, c in raw.pop("calls").items()}
            turn = Turn(**raw, calls=calls)
            self.turns[turn.id] = turn
            # The runner threads of the previous process are gone; say so instead of leaving the turn hanging.
            if not turn.terminal:
                self._finish(turn, "turn.failed", error={"code": "double_restarted", "message": "The double restarted"})
        self.idempotency = {(op, key): (fp, oid) for op, key, fp, oid in data["idempotency"]}
        self._save()

    def _save(self) -> None:
        if self._state_file is None:
            return
        data = {
            "agents": [dataclasses.asdict(a) for a in self.agents.values()],
            "sessions": [dataclasses.asdict(s) for s in self.sessions.values()],
            "turns": [dataclasses.asdict(t) for t in self.turns.values()],
            "idempotency": [[op, key, fp, oid] for (op, key), (fp, oid) in self.idempotency.items()],
        }
        # Write-then-rename so a crash mid-write never leaves a truncated snapshot behind.
        temporary = self._state_file.with_name(self._state_file.name + ".tmp")
        temporary.write_text(json.dumps(data))
        os.replace(temporary, self._state_file)

    def _changed(self) -> None:
        self._save()
        self.cond.notify_all()

    # --- admin: faults, config, state --------------------------------------------------------------------

    def take_fault(self, op: str) -> Fault | None:
        """Count a request for `op` and consume one use of the first fault armed for it."""
        with self.cond:
            self.requests[op] += 1
            for fault in self.faults:
                if fault.op == op and fault.remaining > 0:
                    fault.remaining -= 1
                    return fault
            return None

    def add_fault(self, body: Any) -> Fault:
        body = _object(body, required=("op", "mode"), optional=("times", "status", "delay_ms", "after_events"))
        op, mode = body["op"], body["mode"]
        if op not in OPERATIONS:
            raise ApiError(400, "invalid_parameter", f"op must be one of {sorted(OPERATIONS)}")
        if mode not in FAULT_MODES:
            raise ApiError(400, "invalid_parameter", f"mode must be one of {sorted(FAULT_MODES)}")
        if mode == "cut_stream" and op != "turn_events":
            raise ApiError(400, "invalid_parameter", "cut_stream applies to op turn_events only")
        if mode == "drop_response" and op == "turn_events":
            raise ApiError(400, "invalid_parameter", "use cut_stream (after_events 0) to drop an event stream")
        numbers = {
            name: body.get(name, default)
            for name, default in (("times", 1), ("status", 503), ("delay_ms", 0), ("after_events", 0))
        }
        if any(not isinstance(value, int) or value < 0 for value in numbers.values()) or numbers["times"] < 1:
            raise ApiError(400, "invalid_parameter", "times must be >= 1; status, delay_ms, after_events >= 0")
        if not 400 <= numbers["status"] <= 599:
            raise ApiError(400, "invalid_parameter", "status must be an HTTP error status (400-599)")
        fault = Fault(
            id=new_id("fault"),
            op=op,
            mode=mode,
            remaining=numbers["times"],
            status=numbers["status"],
            delay_ms=numbers["delay_ms"],
            after_events=numbers["after_events"],
        )
        with self.cond:
            self.faults.append(fault)
        return fault

    def configure(self, body: Any) -> Config:
        body = _object(body, required=(), optional=("delta_delay_ms", "delta_chunks"))
        with self.cond:
            delay = body.get("delta_delay_ms", self.config.delta_delay_ms)
            chunks = body.get("delta_chunks", self.config.delta_chunks)
            if not isinstance(delay, int) or delay < 0 or not isinstance(chunks, int) or chunks < 1:
                raise ApiError(400, "invalid_parameter", "delta_delay_ms must be >= 0 and delta_chunks >= 1")
            self.config = Config(delta_delay_ms=delay, delta_chunks=chunks)
            return self.config

    def reset(self) -> None:
        with self.cond:
            # Running turns see their records vanish; cancel them first so their runner threads stop.
            for turn in self.turns.values():
                if not turn.terminal:
                    self._finish(turn, "turn.cancelled")
            self._clear()
            self._changed()

    def admin_state(self) -> dict[str, Any]:
        with self.cond:
            outputs = [
                {
                    "turn_id": turn.id,
                    "call_id": call.call_id,
                    "name": call.name,
                    "output": call.output,
                    "submissions": call.submissions,
                }
                for turn in self.turns.values()
                for call in turn.calls.values()
                if call.output is not None
            ]
            return {
                "counts": {
                    "agents": len(self.agents),
                    "sessions": len(self.sessions),
                    "turns": len(self.turns),
                    "function_call_outputs": len(outputs),
                },
                "agents": [a.public() | {"idempotency_key": a.idempotency_key} for a in self.agents.values()],
                "sessions": [
                    self._session_public(s) | {"idempotency_key": s.idempotency_key} for s in self.sessions.values()
                ],
                "turns": [t.public() | {"idempotency_key": t.idempotency_key} for t in self.turns.values()],
                "function_call_outputs": outputs,
                "requests": dict(self.requests),
                "faults": [dataclasses.asdict(f) for f in self.faults if f.remaining > 0],
                "config": dataclasses.asdict(self.config),
            }

    # --- idempotent creation -----------------------------------------------------------------------------

    def _replay(self, op: str, key: str | None, fingerprint: str) -> str | None:
        """The id created earlier under this key, or None; a reused key with another request is a conflict."""
        if key is None:
            return None
        previous = self.idempotency.get((op, key))
        if previous is None:
            return None
        if previous[0] != fingerprint:
            raise ApiError(409, "idempotency_conflict", "Idempotency-Key was already used with another request")
        return previous[1]

    def _remember(self, op: str, key: str | None, fingerprint: str, object_id: str) -> None:
        if key is not None:
            self.idempotency[(op, key)] = (fingerprint, object_id)

    # --- agents ------------------------------------------------------------------------------------------

    def create_agent(self, body: Any, key: str | None) -> tuple[dict[str, Any], bool]:
        body = _object(body, required=("name",), optional=("model", "instructions", "metadata"))
        name = _string(body, "name")
        model = body.get("model") or "rebyte-echo"
        instructions = body.get("instructions")
        if not isinstance(model, str) or not (instructions is None or isinstance(instructions, str)):
            raise ApiError(400, "invalid_parameter", "model and instructions must be strings")
        metadata = _metadata(body.get("metadata"))
        fingerprint = _fingerprint(body)
        with self.cond:
            existing = self._replay("create_agent", key, fingerprint)
            if existing is not None:
                return self.agents[existing].public(), False
            agent = Agent(new_id("agent"), name, model, instructions, metadata, _now(), key)
            self.agents[agent.id] = agent
            self._remember("create_agent", key, fingerprint, agent.id)
            self._changed()
            return agent.public(), True

    def get_agent(self, agent_id: str) -> dict[str, Any]:
        with self.cond:
            return self._agent(agent_id).public()

    def list_agents(self, query: dict[str, list[str]]) -> dict[str, Any]:
        with self.cond:
            return _page(list(self.agents.values()), query, public=Agent.public)

    def _agent(self, agent_id: str) -> Agent:
        agent = self.agents.get(agent_id)
        if agent is None:
            raise ApiError(404, "agent_not_found", f"No agent {agent_id}", "not_found_error")
        return agent

    # --- sessions ----------------------------------------------------------------------------------------

    def _session_public(self, session: Session) -> dict[str, Any]:
        active = [t for t in self.turns.values() if t.session_id == session.id and not t.terminal]
        if not active:
            status = "idle"
        else:
            status = "requires_action" if active[0].status == "requires_action" else "running"
        return {
            "id": session.id,
            "object": "agent.session",
            "agent_id": session.agent_id,
            "status": status,
            "metadata": session.metadata,
            "created_at": session.created_at,
        }

    def create_session(self, body: Any, key: str | None) -> tuple[dict[str, Any], bool]:
        body = _object(body, required=("agent_id",), optional=("metadata",))
        agent_id = _string(body, "agent_id")
        metadata = _metadata(body.get("metadata"))
        fingerprint = _fingerprint(body)
        with self.cond:
            existing = self._replay("create_session", key, fingerprint)
            if existing is not None:
                return self._session_public(self.sessions[existing]), False
            self._agent(agent_id)
            session = Session(new_id("sess"), agent_id, metadata, _now(), key)
            self.sessions[session.id] = session
            self._remember("create_session", key, fingerprint, session.id)
            self._changed()
            return self._session_public(session), True

    def get_session(self, session_id: str) -> dict[str, Any]:
        with self.cond:
            return self._session_public(self._session(session_id))

    def list_sessions(self, query: dict[str, list[str]]) -> dict[str, Any]:
        with self.cond:
            return _page(
                list(self.sessions.values()),
                query,
                public=self._session_public,
                extra_filters={"agent_id": "agent_id"},
            )

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise ApiError(404, "session_not_found", f"No session {session_id}", "not_found_error")
        return session

    # --- turns -------------------------------------------------------------------------------------------

    def create_turn(self, session_id: str, body: Any, key: str | None) -> tuple[dict[str, Any], bool]:
        body = _object(body, required=("input",), optional=("tools", "metadata"))
        input_text = _string(body, "input")
        tools = _tools(body.get("tools"))
        metadata = _metadata(body.get("metadata"))
        fingerprint = _fingerprint(session_id, body)
        with self.cond:
            existing = self._replay("create_turn", key, fingerprint)
            if existing is not None:
                return self.turns[existing].public(), False
            self._session(session_id)
            turn = Turn(new_id("turn"), session_id, input_text, tools, metadata, _now(), key)
            turn.items.append(
                {
                    "id": new_id("msg"),
                    "type": "message",
                    "role": "user",
                    "status": "completed",
                    "content": [{"type": "input_text", "text": input_text}],
                }
            )
            self.turns[turn.id] = turn
            self._remember("create_turn", key, fingerprint, turn.id)
            self._changed()
            return turn.public(), True

    def get_turn(self, turn_id: str) -> dict[str, Any]:
        with self.cond:
            return self._turn(turn_id).public()

    def list_turns(self, session_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        with self.cond:
            self._session(session_id)
            turns = [t for t in self.turns.values() if t.session_id == session_id]
            return _page(turns, query, public=Turn.public)

    def _turn(self, turn_id: str) -> Turn:
        turn = self.turns.get(turn_id)
        if turn is None:
            raise ApiError(404, "turn_not_found", f"No turn {turn_id}", "not_found_error")
        return turn

    def cancel_turn(self, turn_id: str) -> dict[str, Any]:
        with self.cond:
            turn = self._turn(turn_id)
            # Cancelling a finished turn changes nothing: a completed turn stays completed.
            if not turn.terminal:
                for item in turn.items:
                    if item.get("status") == "in_progress":
                        item["status"] = "incomplete"
                self._finish(turn, "turn.cancelled")
                self._changed()
            return turn.public()

    def submit_output(self, turn_id: str, body: Any) -> dict[str, Any]:
        body = _object(body, required=("call_id", "output"), optional=())
        call_id = _string(body, "call_id")
        output = _string(body, "output", allow_empty=True)
        with self.cond:
            turn = self._turn(turn_id)
            call = turn.calls.get(call_id)
            if call is None:
                raise ApiError(
                    404, "call_not_found", f"Turn {turn_id} has no function call {call_id}", "not_found_error"
                )
            receipt = {"object": "function_call_output", "turn_id": turn_id, "call_id": call_id}
            if call.output is not None:
                if call.output != output:
                    raise ApiError(409, "output_conflict", f"Call {call_id} already has a different output")
                call.submissions += 1
                self._changed()
                return receipt | {"duplicate": True}
            if turn.status != "requires_action":
                raise ApiError(409, "turn_not_awaiting_output", f"Turn {turn_id} is {turn.status}")
            call.output = output
            call.submissions += 1
            item_id = new_id("fco")
            turn.items.append({"id": item_id, "type": "function_call_output", "call_id": call_id, "output": output})
            self._append(turn, "function_call_output", item_id=item_id, call_id=call_id, output=output)
            if all(c.output is not None for c in turn.calls.values()):
                turn.status = "running"
            self._changed()
            return receipt | {"duplicate": False}

    # --- events ------------------------------------------------------------------------------------------

    def events_after(self, turn_id: str, after: int, timeout: float | None = None) -> tuple[list[dict], str]:
        """Events with sequence > after, waiting up to `timeout` for one, and the turn's status."""
        with self.cond:
            turn = self._turn(turn_id)
            if timeout is not None:
                self.cond.wait_for(lambda: len(turn.events) > after or turn.terminal, timeout)
            return list(turn.events[after:]), turn.status

    def _append(self, turn: Turn, event_type: str, **fields: Any) -> None:
        turn.events.append(
            {
                "type": event_type,
                "sequence": len(turn.events) + 1,
                "turn_id": turn.id,
                "session_id": turn.session_id,
                "created_at": _now(),
                **fields,
            }
        )

    def _finish(self, turn: Turn, event_type: str, **fields: Any) -> None:
        turn.status = TERMINAL_EVENT_STATUS[event_type]
        turn.completed_at = _now()
        if event_type == "turn.failed":
            turn.error = fields["error"]
        self._append(turn, event_type, **fields)

    # --- primitives for the turn runner ------------------------------------------------------------------

    def _live_turn(self, turn_id: str) -> Turn:
        turn = self.turns.get(turn_id)
        if turn is None or turn.terminal:
            raise TurnEnded(turn_id)
        return turn

    def start_turn(self, turn_id: str) -> Turn:
        """Wait until the session's earlier turns are finished (turns run in order), then mark it running."""
        with self.cond:
            turn = self._live_turn(turn_id)

            def ready() -> bool:
                if turn.terminal:
                    return True
                for other in self.turns.values():  # creation order
                    if other is turn:
                        return True
                    if other.session_id == turn.session_id and not other.terminal:
                        return False
                return True

            self.cond.wait_for(ready)
            turn = self._live_turn(turn_id)
            turn.status = "running"
            self._append(turn, "turn.started")
            self._changed()
            return turn

    def text_delta(self, turn_id: str, item_id: str, delta: str) -> None:
        with self.cond:
            turn = self._live_turn(turn_id)
            item = next((i for i in turn.items if i["id"] == item_id), None)
            if item is None:
                item = {
                    "id": item_id,
                    "type": "message",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [{"type": "output_text", "text": ""}],
                }
                turn.items.append(item)
            item["content"][0]["text"] += delta
            self._append(turn, "output_text.delta", item_id=item_id, delta=delta)
            self._changed()

    def complete_message(self, turn_id: str, item_id: str) -> None:
        with self.cond:
            turn = self._live_turn(turn_id)
            item = next(i for i in turn.items if i["id"] == item_id)
            item["status"] = "completed"
            text = item["content"][0]["text"]
            turn.output_text += text
            self._append(turn, "message.completed", item_id=item_id, text=text)
            self._changed()

    def request_function_calls(self, turn_id: str, calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Emit one function call per (name, arguments), go requires_action, and wait for every output."""
        with self.cond:
            turn = self._live_turn(turn_id)
            created = []
            for name, arguments in calls:
                call = FunctionCall(new_id("call"), new_id("fc"), name, arguments)
                turn.calls[call.call_id] = call
                created.append(call)
                turn.items.append(
                    {
                        "id": call.item_id,
                        "type": "function_call",
                        "call_id": call.call_id,
                        "name": name,
                        "arguments": arguments,
                    }
                )
                self._append(
                    turn,
                    "function_call",
                    item_id=call.item_id,
                    call_id=call.call_id,
                    name=name,
                    arguments=arguments,
                )
            turn.status = "requires_action"
            self._append(turn, "turn.requires_action", required_actions=turn.required_actions())
            self._changed()
            self.cond.wait_for(lambda: turn.terminal or all(c.output is not None for c in created))
            self._live_turn(turn_id)
            return [(c.name, c.output or "") for c in created]

    def complete_turn(self, turn_id: str) -> None:
        with self.cond:
            turn = self._live_turn(turn_id)
            self._finish(turn, "turn.completed", output_text=turn.output_text)
            self._changed()

    def fail_turn(self, turn_id: str, code: str, message: str) -> None:
        with self.cond:
            turn = self._live_turn(turn_id)
            self._finish(turn, "turn.failed", error={"code": code, "message": message})
            self._changed()

    def pacing(self) -> tuple[float, int]:
        with self.cond:
            return self.config.delta_delay_ms / 1000, self.config.delta_chunks
