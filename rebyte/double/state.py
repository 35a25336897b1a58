"""State of the Rebyte double: agents, sessions, turns, items, the live event fan-out and the test knobs.

Everything lives in memory under one condition variable; turn runners, live streams and HTTP handlers wait
on it, so a change made by any of them wakes the others at once. Object shapes are those of the `openai`
SDK's generated models (`openai.types.beta`), which the contract tests parse with strict validation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import queue
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

TERMINAL_TURN_STATUSES = frozenset({"completed", "failed", "cancelled"})
METADATA_MAX_KEYS = 16
METADATA_KEY_MAX = 64
METADATA_VALUE_MAX = 512
PAGE_LIMIT_DEFAULT = 20
PAGE_LIMIT_MAX = 100

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
# What configures an agent: a saved agent's create, and a session's override of it, accept these fields.
AGENT_CONFIGURATION = frozenset(
    {"instructions", "model", "tools", "compaction", "experimental", "multi_agent", "reasoning", "service_tier", "text"}
)
# The literals of the SDK's AgentReasoningParam.
REASONING_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
REASONING_SUMMARIES = frozenset({"concise", "detailed", "auto"})


class ApiError(Exception):
    """An error the HTTP layer answers as `{"error": {message, type, code, param}}`."""

    def __init__(self, status: int, code: str, message: str, error_type: str = "invalid_request_error", param=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.error_type = error_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.error_type, "code": self.code, "param": self.param}}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _now() -> int:
    return int(time.time())


@dataclass
class Config:
    delta_delay_ms: int = 20
    delta_chunks: int = 4
    # A new session shows in lists only this long after it was created (the SDK documents session
    # listings as eventually consistent), so callers must not read "absent" from one early listing.
    listing_lag_ms: int = 0
    # Whether the echo agent reasons before it answers: then each turn of a session whose agent asks for reasoning
    # summaries (`reasoning.summary` not null) opens with a reasoning item and its summary events.
    reasoning_summaries: bool = False


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
    hits: int = 0


@dataclass
class Session:
    obj: dict[str, Any]
    agent_id: str
    tools: list[dict[str, Any]]
    listed_after: float
    turn_ids: list[str] = field(default_factory=list)
    item_ids: list[str] = field(default_factory=list)
    subscribers: list[queue.Queue] = field(default_factory=list)


@dataclass
class Turn:
    obj: dict[str, Any]
    script: str
    # Function calls the turn waits for: call_id -> (name, arguments object); answers by call_id.
    pending_calls: dict[str, tuple[str, dict]] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)


class TurnEnded(Exception):
    """Tells a turn runner that its turn reached a terminal state elsewhere (a cancel), so it must stop."""


def _usage() -> dict[str, Any]:
    return {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }


def _agent_config(body: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The resolved agent configuration (the fields an Agent and a session's `agent` share)."""
    base = base or {}
    tools = body["tools"] if body.get("tools") is not None else base.get("tools", [])
    return {
        "instructions": body.get("instructions", base.get("instructions")),
        "model": body.get("model") or base.get("model"),
        "multi_agent": {"enabled": False, "max_concurrent_subagents": None},
        "name": base.get("name", body.get("name")),
        "reasoning": _reasoning(body.get("reasoning"), base.get("reasoning")),
        "service_tier": "auto",
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tools": [_resolved_tool(tool) for tool in tools],
    }


def _reasoning(requested: Any, base: dict[str, Any] | None) -> dict[str, Any]:
    """The resolved reasoning configuration: a session's override replaces its agent's fields it names."""
    resolved = dict(base or {"effort": None, "summary": None})
    if requested is None:
        return resolved
    if not isinstance(requested, dict):
        raise ApiError(400, "invalid_type", "reasoning must be an object", param="reasoning")
    _only(requested, {"effort", "summary"})
    for name, allowed in (("effort", REASONING_EFFORTS), ("summary", REASONING_SUMMARIES)):
        if name in requested:
            if requested[name] is not None and requested[name] not in allowed:
                raise ApiError(400, "invalid_value", f"reasoning.{name} must be one of {sorted(allowed)} or null")
            resolved[name] = requested[name]
    return resolved


def _resolved_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool["description"],
        "parameters": tool["parameters"],
        "defer_loading": bool(tool.get("defer_loading", False)),
    }


class Store:
    def __init__(self, config: Config):
        self._startup_config = dataclasses.replace(config)
        self.cond = threading.Condition()
        self._clear(config)

    def _clear(self, config: Config) -> None:
        self.config = config
        self.agents: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, Session] = {}
        self.turns: dict[str, Turn] = {}
        self.items: dict[str, dict[str, Any]] = {}
        # (session id, Idempotency-Key) -> fingerprint of the body first sent with it.
        self.idempotency: dict[tuple[str, str], str] = {}
        self.input_events: list[dict[str, Any]] = []
        self.steering: list[dict[str, Any]] = []
        self.faults: list[Fault] = []
        self.requests: Counter[str] = Counter()
        self.request_log: list[dict[str, Any]] = []

    # --- test knobs ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        with self.cond:
            for session in self.sessions.values():
                for subscriber in session.subscribers:
                    subscriber.put(None)
            for turn in self.turns.values():
                if turn.obj["status"] not in TERMINAL_TURN_STATUSES:
                    turn.obj["status"] = "cancelled"
            self._clear(dataclasses.replace(self._startup_config))
            self.cond.notify_all()

    def configure(self, body: dict[str, Any]) -> Config:
        with self.cond:
            if "reasoning_summaries" in body:
                if not isinstance(body["reasoning_summaries"], bool):
                    raise ApiError(400, "invalid_config", "reasoning_summaries must be true or false")
                self.config.reasoning_summaries = body["reasoning_summaries"]
            for name in ("delta_delay_ms", "delta_chunks", "listing_lag_ms"):
                if name in body:
                    value = body[name]
                    if not isinstance(value, int) or value < (1 if name == "delta_chunks" else 0):
                        raise ApiError(400, "invalid_config", f"{name} must be a non-negative integer")
                    setattr(self.config, name, value)
            return dataclasses.replace(self.config)

    def pacing(self) -> tuple[float, int]:
        with self.cond:
            return self.config.delta_delay_ms / 1000, self.config.delta_chunks

    def add_fault(self, body: dict[str, Any]) -> Fault:
        op, mode = body.get("op"), body.get("mode")
        if op not in OPERATIONS and op != "*":
            raise ApiError(400, "invalid_fault", f"op must be '*' or one of {sorted(OPERATIONS)}")
        if mode not in FAULT_MODES:
            raise ApiError(400, "invalid_fault", f"mode must be one of {sorted(FAULT_MODES)}")
        if mode == "cut_stream" and op not in STREAMING_OPERATIONS:
            raise ApiError(400, "invalid_fault", f"cut_stream applies to {sorted(STREAMING_OPERATIONS)} only")
        seconds = body.get("seconds")
        fault = Fault(
            id=new_id("fault"),
            op=op,
            mode=mode,
            times=int(body.get("times", 1)),
            status=int(body.get("status", 503)),
            delay_ms=int(body.get("delay_ms", 0)),
            after_events=int(body.get("after_events", 0)),
            until=time.monotonic() + float(seconds) if seconds is not None else None,
        )
        with self.cond:
            self.faults.append(fault)
        return fault

    def take_fault(self, op: str) -> Fault | None:
        with self.cond:
            now = time.monotonic()
            self.faults = [f for f in self.faults if (f.until is None and f.times > 0) or (f.until or 0) > now]
            for fault in self.faults:
                if fault.op in (op, "*"):
                    if fault.until is None:
                        fault.times -= 1
                    fault.hits += 1
                    return fault
        return None

    def record_request(self, op: str, entry: dict[str, Any]) -> None:
        with self.cond:
            self.requests[op] += 1
            self.request_log.append({"op": op, **entry})

    def admin_state(self) -> dict[str, Any]:
        with self.cond:
            return {
                "counts": {
                    "agents": len(self.agents),
                    "sessions": len(self.sessions),
                    "turns": len(self.turns),
                    "input_events": len(self.input_events),
                    "steering": len(self.steering),
                },
                # Open live streams per session: a client that leaves must close its stream.
                "live_streams": {s.obj["id"]: len(s.subscribers) for s in self.sessions.values() if s.subscribers},
                "agents": list(self.agents.values()),
                "sessions": [
                    {**s.obj, "turns": [self.turns[t].obj for t in s.turn_ids], "items": self._items_of(s)}
                    for s in self.sessions.values()
                ],
                "input_events": list(self.input_events),
                "steering": list(self.steering),
                "requests": dict(self.requests),
                "faults": [dataclasses.asdict(f) for f in self.faults],
                "config": dataclasses.asdict(self.config),
            }

    def request_log_snapshot(self) -> list[dict[str, Any]]:
        with self.cond:
            return list(self.request_log)

    # --- agents -------------------------------------------------------------------------------------------

    def create_agent(self, body: dict[str, Any]) -> dict[str, Any]:
        _only(body, AGENT_CONFIGURATION | {"name", "metadata"})
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise ApiError(400, "missing_required_parameter", "model is required", param="model")
        _check_metadata(body.get("metadata"))
        _check_tools(body.get("tools"))
        now = _now()
        agent = {
            "id": new_id("agent"),
            "object": "agent",
            "created_at": now,
            "updated_at": now,
            "metadata": dict(body.get("metadata") or {}),
            **_agent_config(body),
            "name": body.get("name"),
        }
        with self.cond:
            self.agents[agent["id"]] = agent
        return agent

    def get_agent(self, agent_id: str) -> dict[str, Any]:
        with self.cond:
            agent = self.agents.get(agent_id)
            if agent is None:
                raise ApiError(404, "not_found", f"No agent {agent_id}", "not_found_error")
            return agent

    def list_agents(self, query: dict[str, list[str]]) -> dict[str, Any]:
        _only(query, {"after", "limit", "order"})
        with self.cond:
            return _page(list(self.agents.values()), query)

    def delete_agent(self, agent_id: str) -> dict[str, Any]:
        """`AgentDeleted`; 404 afterwards. Stricter than anything the SDK promises: an agent whose sessions still
        exist is refused (409), so a client deletes the sessions first and never relies on a cascade."""
        with self.cond:
            self.get_agent(agent_id)
            if any(session.agent_id == agent_id for session in self.sessions.values()):
                raise ApiError(409, "agent_has_sessions", f"Agent {agent_id} still has sessions: delete them first")
            del self.agents[agent_id]
            return {"id": agent_id, "deleted": True, "object": "agent.deleted"}

    # --- sessions -----------------------------------------------------------------------------------------

    def create_session(self, body: dict[str, Any]) -> tuple[dict[str, Any], Turn, queue.Queue | None]:
        """The new session, its first turn (for the caller to run) and, for a streamed create (`stream: true`), the
        session's event stream from its creation: `agent.session.created` first, then every event of the session, as
        a live stream would carry them (subscribed before the turn starts, so nothing of it is missed)."""
        _only(
            body,
            {
                "environment",
                "agent",
                "agent_id",
                "input",
                "metadata",
                "prompt_cache_options",
                "review",
                "spend_control",
                "stream",
                "stream_options",
                "vault_ids",
            },
        )
        if body.get("environment") != {"type": "none"}:
            raise ApiError(
                400,
                "invalid_environment",
                "environment is required; the double serves {type: none}",
                param="environment",
            )
        streamed = _stream_request(body)
        _check_metadata(body.get("metadata"))
        override = body.get("agent") or {}
        if not isinstance(override, dict):
            raise ApiError(400, "invalid_type", "agent must be an object", param="agent")
        _only(override, AGENT_CONFIGURATION)
        _check_tools(override.get("tools"))
        script = _input_script(body.get("input"), param="input")
        with self.cond:
            base = None
            if body.get("agent_id") is not None:
                base = self.agents.get(body["agent_id"])
                if base is None:
                    raise ApiError(404, "not_found", f"No agent {body['agent_id']}", "not_found_error")
            elif not override.get("model"):
                raise ApiError(400, "missing_required_parameter", "agent.model is required without agent_id")
            now = _now()
            agent_config = _agent_config(override, base)
            session_id = new_id("sess")
            obj = {
                "id": session_id,
                "object": "agent.session",
                "agent": {"id": base["id"] if base else new_id("agent"), **agent_config},
                "created_at": now,
                "environment": {"type": "none"},
                "error": None,
                "last_active_at": now,
                "metadata": dict(body.get("metadata") or {}),
                "required_actions": [],
                "spend_control": {"consumed": None, "limit": None},
                "status": "idle",
                "usage": None,
                "vault_ids": list(body.get("vault_ids") or []),
            }
            session = Session(
                obj=obj,
                agent_id=obj["agent"]["id"],
                tools=agent_config["tools"],
                listed_after=time.monotonic() + self.config.listing_lag_ms / 1000,
            )
            self.sessions[session_id] = session
            subscriber = None
            if streamed:
                subscriber = queue.Queue()
                session.subscribers.append(subscriber)
                created = {"type": "agent.session.created", "event_id": new_id("evt")}
                subscriber.put({**created, "session": json.loads(json.dumps(obj))})
            turn = self._start_turn(session, body["input"], script)
            return obj, turn, subscriber

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise ApiError(404, "not_found", f"No session {session_id}", "not_found_error")
        return session

    def get_session(self, session_id: str) -> dict[str, Any]:
        with self.cond:
            return self.session(session_id).obj

    def delete_session(self, session_id: str) -> dict[str, Any]:
        """`AgentSessionDeleted`; the session, its turns and items are 404 afterwards and its live streams end.

        The SDK says running execution must be cancelled first and that deletion may cancel a public turn whose
        execution ended; the status code of the refusal is not documented, so the double is stricter: any turn not
        yet completed, failed or cancelled (running, queued or waiting on a tool result) is refused with 409.
        """
        with self.cond:
            session = self.session(session_id)
            open_turns = [t for t in session.turn_ids if self.turns[t].obj["status"] not in TERMINAL_TURN_STATUSES]
            if open_turns:
                message = f"Session {session_id} has a turn in progress ({open_turns[0]}): cancel it first"
                raise ApiError(409, "session_busy", message)
            for subscriber in session.subscribers:
                subscriber.put(None)
            for turn_id in session.turn_ids:
                del self.turns[turn_id]
            for item_id in session.item_ids:
                self.items.pop(item_id, None)
            del self.sessions[session_id]
            self.cond.notify_all()
            return {"id": session_id, "deleted": True, "object": "agent.session.deleted"}

    def list_sessions(self, query: dict[str, list[str]]) -> dict[str, Any]:
        _only(query, {"after", "limit", "order", "agent_id"})
        with self.cond:
            now = time.monotonic()
            agent_id = query.get("agent_id", [None])[-1]
            visible = [
                s.obj
                for s in self.sessions.values()
                if s.listed_after <= now and (agent_id is None or s.agent_id == agent_id)
            ]
            return _page(visible, query)

    # --- turns and items ----------------------------------------------------------------------------------

    def list_turns(self, session_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        _only(query, {"after", "limit", "order"})
        with self.cond:
            session = self.session(session_id)
            return _page([self.turns[t].obj for t in session.turn_ids], query)

    def get_turn(self, session_id: str, turn_id: str) -> dict[str, Any]:
        with self.cond:
            session = self.session(session_id)
            if turn_id not in session.turn_ids:
                raise ApiError(404, "not_found", f"No turn {turn_id} in {session_id}", "not_found_error")
            return self.turns[turn_id].obj

    def list_items(self, session_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        _only(query, {"after", "limit", "order"})
        with self.cond:
            return _page(self._items_of(self.session(session_id)), query)

    def _items_of(self, session: Session) -> list[dict[str, Any]]:
        return [self.items[i] for i in session.item_ids]

    # --- input events -------------------------------------------------------------------------------------

    def accept_events(self, session_id: str, body: dict[str, Any], key: str | None) -> Turn | None:
        """Applies input events (202 semantics); returns a turn the caller must start running, if any."""
        _only(body, {"events"})
        events = body.get("events")
        if not isinstance(events, list) or not events:
            raise ApiError(400, "invalid_type", "events must be a non-empty array", param="events")
        fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self.cond:
            session = self.session(session_id)
            if key is not None:
                seen = self.idempotency.get((session_id, key))
                if seen == fingerprint:
                    return None  # a resend: already accepted, nothing happens twice
                if seen is not None:
                    raise ApiError(409, "idempotency_key_reused", "This Idempotency-Key was used with another body")
            for event in events:
                _check_input_event(event)
            started = None
            for event in events:
                started = self._apply_input(session, event, key) or started
            if key is not None:
                self.idempotency[(session_id, key)] = fingerprint
            self.cond.notify_all()
            return started

    def _apply_input(self, session: Session, event: dict[str, Any], key: str | None) -> Turn | None:
        active = self._active_turn(session)
        started = self._act_on_input(session, active, event)
        # Recorded once accepted: a refused event (409, 400) is not something the session received.
        self.input_events.append(
            {
                "session_id": session.obj["id"],
                "type": event["type"],
                "idempotency_key": key,
                "active_turn_id": active.obj["id"] if active else None,
                "event": event,
            }
        )
        return started

    def _act_on_input(self, session: Session, active: Turn | None, event: dict[str, Any]) -> Turn | None:
        kind = event["type"]
        if kind == "agent.session.input.message":
            script = _input_script(event["input"], param="events.input")
            if active is not None:
                # Sent while a turn runs, a message steers it: recorded so tests can assert it never happens.
                self.steering.append({"session_id": session.obj["id"], "turn_id": active.obj["id"], "text": script})
                self._add_user_items(session, active, event["input"])
                return None
            return self._start_turn(session, event["input"], script)
        if kind == "agent.session.input.cancel":
            if active is not None:
                self._finish_turn(session, active, "cancelled")
            return None
        turn = self.turns.get(event["turn_id"])
        if turn is None or turn.obj["session_id"] != session.obj["id"]:
            raise ApiError(404, "not_found", f"No turn {event['turn_id']}", "not_found_error", param="turn_id")
        call_id = event["call_id"]
        if call_id in turn.answers:
            raise ApiError(409, "tool_result_already_submitted", f"{call_id} already has a result", param="call_id")
        if call_id not in turn.pending_calls or turn.obj["status"] != "waiting":
            raise ApiError(400, "no_pending_function_call", f"Turn does not wait for {call_id}", param="call_id")
        answer = {"success": event["success"], "output": event.get("output"), "error": event.get("error")}
        turn.answers[call_id] = answer
        del turn.pending_calls[call_id]
        self._add_item(
            session,
            {
                "id": new_id("fco"),
                "type": "function_call_output",
                "call_id": call_id,
                "output": answer["output"] if answer["success"] else None,
                "error": None if answer["success"] else answer["error"],
                "status": "completed" if answer["success"] else "failed",
                "turn_id": turn.obj["id"],
            },
            done=False,
        )
        session.obj["required_actions"] = [a for a in session.obj["required_actions"] if a.get("call_id") != call_id]
        if not turn.pending_calls:
            turn.obj["status"] = "in_progress"
            session.obj["status"] = "in_progress"
            self._emit(session, "agent.session.turn.in_progress", turn=turn)
            self._emit(session, "agent.session.in_progress")
        return None

    def _active_turn(self, session: Session) -> Turn | None:
        for turn_id in session.turn_ids:
            turn = self.turns[turn_id]
            if turn.obj["status"] not in TERMINAL_TURN_STATUSES:
                return turn
        return None

    def _start_turn(self, session: Session, input_messages, script: str) -> Turn:
        now = _now()
        turn = Turn(
            obj={
                "id": new_id("turn"),
                "object": "agent.session.turn",
                "agent_id": session.agent_id,
                "session_id": session.obj["id"],
                "status": "queued",
                "created_at": now,
                "started_at": None,
                "completed_at": None,
                "error": None,
                "usage": None,
            },
            script=script,
        )
        self.turns[turn.obj["id"]] = turn
        session.turn_ids.append(turn.obj["id"])
        session.obj["last_active_at"] = now
        self._emit(session, "agent.session.turn.created", turn=turn)
        self._add_user_items(session, turn, input_messages)
        return turn

    def _add_user_items(self, session: Session, turn: Turn, input_messages) -> None:
        if isinstance(input_messages, str):
            input_messages = [{"role": "user", "content": [{"type": "input_text", "text": input_messages}]}]
        for message in input_messages:
            self._add_item(
                session,
                {
                    "id": new_id("msg"),
                    "type": "message",
                    "role": "user",
                    "status": "completed",
                    "phase": None,
                    "content": [{"type": "input_text", "text": part["text"]} for part in message["content"]],
                    "turn_id": turn.obj["id"],
                },
                done=False,
            )

    def _add_item(self, session: Session, item: dict[str, Any], *, done: bool) -> None:
        self.items[item["id"]] = item
        session.item_ids.append(item["id"])
        output_index = len(session.item_ids) - 1
        self._emit(session, "agent.session.turn.item.added", item=item, output_index=output_index)
        if done:
            self._emit(session, "agent.session.turn.item.done", item=item, output_index=output_index)

    def _output_index(self, session: Session, item_id: str) -> int:
        return session.item_ids.index(item_id)

    def _finish_turn(self, session: Session, turn: Turn, status: str, error: dict | None = None) -> None:
        turn.obj.update(status=status, completed_at=_now(), error=error, usage=_usage())
        turn.pending_calls.clear()
        for item_id in session.item_ids:
            item = self.items[item_id]
            if item.get("turn_id") == turn.obj["id"] and item["status"] == "in_progress":
                item["status"] = "incomplete"
        session.obj.update(status="idle", required_actions=[], last_active_at=_now())
        self._emit(session, f"agent.session.turn.{status}", turn=turn, usage=_usage())
        self._emit(session, "agent.session.idle")
        self.cond.notify_all()

    # --- the turn runner's side ---------------------------------------------------------------------------

    def begin(self, turn: Turn) -> str:
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            turn.obj.update(status="in_progress", started_at=_now())
            session.obj["status"] = "in_progress"
            self._emit(session, "agent.session.turn.in_progress", turn=turn)
            self._emit(session, "agent.session.in_progress")
            return turn.script

    def open_message(self, turn: Turn) -> str:
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            item = {
                "id": new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "phase": "final_answer",
                "content": [],
                "turn_id": turn.obj["id"],
            }
            self._add_item(session, item, done=False)
            return item["id"]

    def text_delta(self, turn: Turn, item_id: str, delta: str) -> None:
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            item = self.items[item_id]
            if not item["content"]:
                item["content"].append({"type": "output_text", "text": ""})
            item["content"][0]["text"] += delta
            self._emit(
                session,
                "agent.session.turn.output_text.delta",
                turn_id=turn.obj["id"],
                item_id=item_id,
                output_index=self._output_index(session, item_id),
                content_index=0,
                delta=delta,
            )

    def close_message(self, turn: Turn, item_id: str) -> None:
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            item = self.items[item_id]
            item["status"] = "completed"
            text = item["content"][0]["text"] if item["content"] else ""
            index = self._output_index(session, item_id)
            self._emit(
                session,
                "agent.session.turn.output_text.done",
                turn_id=turn.obj["id"],
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
            )
            self._emit(session, "agent.session.turn.item.done", item=item, output_index=index)

    def open_reasoning(self, turn: Turn) -> str | None:
        """A reasoning item with one empty summary part, or None when the agent reasons silently: the knob is off
        or the session's agent asked for no summaries (`reasoning.summary` null, as the real service does)."""
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            if not self.config.reasoning_summaries or session.obj["agent"]["reasoning"]["summary"] is None:
                return None
            item = {
                "id": new_id("rs"),
                "type": "reasoning",
                "status": "in_progress",
                "summary": [],
                "turn_id": turn.obj["id"],
            }
            self._add_item(session, item, done=False)
            item["summary"].append({"type": "summary_text", "text": ""})
            self._emit(
                session,
                "agent.session.turn.reasoning_summary_part.added",
                **self._summary_fields(session, turn, item),
                part={"type": "summary_text", "text": ""},
            )
            return item["id"]

    def summary_delta(self, turn: Turn, item_id: str, delta: str) -> None:
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            item = self.items[item_id]
            item["summary"][0]["text"] += delta
            self._emit(
                session,
                "agent.session.turn.reasoning_summary_text.delta",
                **self._summary_fields(session, turn, item),
                delta=delta,
            )

    def close_reasoning(self, turn: Turn, item_id: str) -> None:
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            item = self.items[item_id]
            part = dict(item["summary"][0])
            fields = self._summary_fields(session, turn, item)
            self._emit(session, "agent.session.turn.reasoning_summary_text.done", **fields, text=part["text"])
            self._emit(session, "agent.session.turn.reasoning_summary_part.done", **fields, part=part)
            item["status"] = "completed"
            self._emit(session, "agent.session.turn.item.done", item=item, output_index=fields["output_index"])

    def _summary_fields(self, session: Session, turn: Turn, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "turn_id": turn.obj["id"],
            "item_id": item["id"],
            "output_index": self._output_index(session, item["id"]),
            "summary_index": len(item["summary"]) - 1,
        }

    def call_functions(self, turn: Turn, calls: list[tuple[str, dict]]) -> list[tuple[str, dict[str, Any]]]:
        """Emits the function calls, waits until each has a result, and returns (name, result) in order."""
        with self.cond:
            session = self.sessions[turn.obj["session_id"]]
            self._check_running(turn)
            call_ids = []
            for name, arguments in calls:
                call_id = new_id("call")
                call_ids.append((call_id, name))
                turn.pending_calls[call_id] = (name, arguments)
                self._add_item(
                    session,
                    {
                        "id": new_id("fc"),
                        "type": "function_call",
                        "call_id": call_id,
                        "name": name,
                        "arguments": arguments,
                        "status": "completed",
                        "turn_id": turn.obj["id"],
                    },
                    done=True,
                )
            turn.obj["status"] = "waiting"
            session.obj["status"] = "requires_action"
            session.obj["required_actions"] = [
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": name,
                    "arguments": turn.pending_calls[call_id][1],
                    "turn_id": turn.obj["id"],
                }
                for call_id, name in call_ids
            ]
            self._emit(session, "agent.session.requires_action")
            while True:
                self._check_running(turn, allow_waiting=True)
                if turn.obj["status"] == "in_progress":
                    return [(name, turn.answers[call_id]) for call_id, name in call_ids]
                self.cond.wait()

    def fail(self, turn: Turn, code: str, message: str) -> None:
        with self.cond:
            self._check_running(turn)
            self._finish_turn(self.sessions[turn.obj["session_id"]], turn, "failed", {"code": code, "message": message})

    def complete(self, turn: Turn) -> None:
        with self.cond:
            self._check_running(turn)
            self._finish_turn(self.sessions[turn.obj["session_id"]], turn, "completed")

    def cut_live_streams(self, turn: Turn) -> None:
        with self.cond:
            for subscriber in self.sessions[turn.obj["session_id"]].subscribers:
                subscriber.put(None)

    def _check_running(self, turn: Turn, *, allow_waiting: bool = False) -> None:
        if turn.obj["status"] in TERMINAL_TURN_STATUSES or (turn.obj["status"] == "waiting" and not allow_waiting):
            raise TurnEnded(turn.obj["id"])
        if turn.obj["id"] not in self.turns:  # reset
            raise TurnEnded(turn.obj["id"])

    # --- live events --------------------------------------------------------------------------------------

    def subscribe(self, session_id: str) -> queue.Queue:
        with self.cond:
            session = self.session(session_id)
            subscriber: queue.Queue = queue.Queue()
            session.subscribers.append(subscriber)
            return subscriber

    def unsubscribe(self, session_id: str, subscriber: queue.Queue) -> None:
        with self.cond:
            session = self.sessions.get(session_id)
            if session is not None and subscriber in session.subscribers:
                session.subscribers.remove(subscriber)

    def _emit(self, session: Session, event_type: str, *, turn: Turn | None = None, **fields) -> None:
        """Fans an event out to the session's live streams; nothing is kept for later (no replay)."""
        event: dict[str, Any] = {"type": event_type, "event_id": new_id("evt")}
        if event_type.startswith("agent.session.turn."):
            event["session_id"] = session.obj["id"]
            if turn is not None:
                event["turn"] = json.loads(json.dumps(turn.obj))
                event["turn_id"] = turn.obj["id"]
            if "item" in fields:
                fields["item"] = json.loads(json.dumps(fields["item"]))
                event["turn_id"] = fields["item"].get("turn_id")
            event.update(fields)
        else:
            event["session"] = json.loads(json.dumps(session.obj))
        for subscriber in session.subscribers:
            subscriber.put(event)


# --- request validation ----------------------------------------------------------------------------------


def _only(mapping: dict[str, Any], allowed: set[str]) -> None:
    if not isinstance(mapping, dict):
        raise ApiError(400, "invalid_type", "expected a JSON object")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise ApiError(400, "unknown_parameter", f"Unknown parameter: {unknown[0]}", param=unknown[0])


def _stream_request(body: dict[str, Any]) -> bool:
    """Whether a session create asks for its event stream; `stream_options` only go with `stream: true` (the SDK)."""
    streamed = body.get("stream", False)
    if not isinstance(streamed, bool):
        raise ApiError(400, "invalid_type", "stream must be a boolean", param="stream")
    options = body.get("stream_options")
    if options is not None:
        if not streamed:
            message = "stream_options is only allowed with stream=true"
            raise ApiError(400, "invalid_parameter", message, param="stream_options")
        _only(options, {"include_obfuscation"})
        if not isinstance(options.get("include_obfuscation", True), bool):
            raise ApiError(400, "invalid_type", "include_obfuscation must be a boolean", param="stream_options")
    return streamed


def _check_metadata(metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or len(metadata) > METADATA_MAX_KEYS:
        raise ApiError(400, "invalid_metadata", f"metadata is an object of at most {METADATA_MAX_KEYS} pairs")
    for key, value in metadata.items():
        if not (1 <= len(key) <= METADATA_KEY_MAX) or not isinstance(value, str) or len(value) > METADATA_VALUE_MAX:
            raise ApiError(400, "invalid_metadata", "metadata keys are 1–64 characters, values strings ≤ 512")


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise ApiError(400, "invalid_type", "tools must be an array", param="tools")
    names = set()
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ApiError(400, "unsupported_tool", "the double serves function tools only", param="tools")
        for required in ("name", "description", "parameters"):
            if required not in tool:
                raise ApiError(400, "missing_required_parameter", f"tools[].{required} is required", param="tools")
        if tool["name"] in names:
            raise ApiError(400, "duplicate_tool", f"tool {tool['name']} is declared twice", param="tools")
        names.add(tool["name"])


def _input_script(input_value: Any, *, param: str) -> str:
    """Validates user input and returns the text the echo agent reads: the last input_text part."""
    if isinstance(input_value, str) and input_value.strip():
        return input_value
    if not isinstance(input_value, list) or not input_value:
        raise ApiError(400, "missing_required_parameter", "input (the first user message) is required", param=param)
    texts = []
    for message in input_value:
        if (
            not isinstance(message, dict)
            or message.get("role") != "user"
            or message.get("type", "message") != "message"
        ):
            raise ApiError(400, "invalid_input", "input messages have role user", param=param)
        content = message.get("content")
        if not isinstance(content, list) or not content:
            raise ApiError(400, "invalid_input", "input content is a non-empty array", param=param)
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "input_text" or not isinstance(part.get("text"), str):
                raise ApiError(400, "invalid_input", "the double reads input_text parts only", param=param)
            texts.append(part["text"])
    return texts[-1]


def _check_input_event(event: Any) -> None:
    if not isinstance(event, dict):
        raise ApiError(400, "invalid_type", "each event is an object", param="events")
    kind = event.get("type")
    if kind == "agent.session.input.message":
        _only(event, {"type", "input"})
        _input_script(event.get("input"), param="events.input")
    elif kind == "agent.session.input.cancel":
        _only(event, {"type"})
    elif kind == "agent.session.input.tool_result":
        _only(event, {"type", "turn_id", "call_id", "success", "output", "error"})
        if not isinstance(event.get("turn_id"), str) or not isinstance(event.get("call_id"), str):
            raise ApiError(400, "missing_required_parameter", "tool_result needs turn_id and call_id")
        if not isinstance(event.get("success"), bool):
            raise ApiError(400, "missing_required_parameter", "tool_result needs success", param="success")
        if event["success"] and not isinstance(event.get("output"), str | list):
            raise ApiError(400, "missing_required_parameter", "a successful tool_result carries output")
        if not event["success"] and not isinstance(event.get("error"), str):
            raise ApiError(400, "missing_required_parameter", "a failed tool_result carries error text")
    else:
        raise ApiError(400, "unsupported_event", f"the double does not accept {kind!r} events", param="events.type")


def _page(objects: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
    raw_limit = query.get("limit", [str(PAGE_LIMIT_DEFAULT)])[-1]
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= PAGE_LIMIT_MAX:
        raise ApiError(400, "invalid_parameter", f"limit must be 1–{PAGE_LIMIT_MAX}", param="limit")
    order = query.get("order", ["desc"])[-1]
    if order not in ("asc", "desc"):
        raise ApiError(400, "invalid_parameter", "order must be asc or desc", param="order")
    ordered = objects if order == "asc" else list(reversed(objects))
    after = query.get("after", [None])[-1]
    if after is not None:
        ids = [o["id"] for o in ordered]
        if after not in ids:
            raise ApiError(400, "invalid_parameter", f"after={after} names no element of this list", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    data = ordered[: int(raw_limit)]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(ordered) > len(data),
    }
