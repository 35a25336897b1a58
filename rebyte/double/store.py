"""State of the Rebyte double: agents, sessions, turns, items, the input events received and the test knobs.

Everything lives in memory under one condition variable; turn runners, live streams and HTTP handlers wait
on it, so a change made by any of them wakes the others at once. Object shapes are those of the `openai`
SDK's generated models (`openai.types.beta`), which the contract tests parse with strict validation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import queue
import threading
import time
from collections import Counter
from typing import Any

from rebyte.double import records
from rebyte.double.checks import (
    check_input_event,
    check_metadata,
    check_tools,
    input_script,
    only,
    page,
    stream_request,
)
from rebyte.double.errors import ApiError
from rebyte.double.faults import Faults
from rebyte.double.resources import (
    AGENT_CONFIGURATION,
    TERMINAL_TURN_STATUSES,
    Config,
    Session,
    Turn,
    agent_config,
    agent_object,
    new_id,
    session_object,
    wire_copy,
)

SESSION_CREATE_FIELDS = frozenset(
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
    }
)


class Store:
    def __init__(self, config: Config):
        self._startup_config = dataclasses.replace(config)
        self.cond = threading.Condition()
        self.faults = Faults(self.cond)
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
        self.faults.clear()
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
                "faults": self.faults.snapshot(),
                "config": dataclasses.asdict(self.config),
            }

    def request_log_snapshot(self) -> list[dict[str, Any]]:
        with self.cond:
            return list(self.request_log)

    # --- agents -------------------------------------------------------------------------------------------

    def create_agent(self, body: dict[str, Any]) -> dict[str, Any]:
        only(body, AGENT_CONFIGURATION | {"name", "metadata"})
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise ApiError(400, "missing_required_parameter", "model is required", param="model")
        check_metadata(body.get("metadata"))
        check_tools(body.get("tools"))
        agent = agent_object(body)
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
        only(query, {"after", "limit", "order"})
        with self.cond:
            return page(list(self.agents.values()), query)

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
        streamed, override, script = _checked_session_create(body)
        with self.cond:
            base = None
            if body.get("agent_id") is not None:
                base = self.agents.get(body["agent_id"])
                if base is None:
                    raise ApiError(404, "not_found", f"No agent {body['agent_id']}", "not_found_error")
            elif not override.get("model"):
                raise ApiError(400, "missing_required_parameter", "agent.model is required without agent_id")
            config = agent_config(override, base)
            obj = session_object(body, base, config)
            session = Session(
                obj=obj,
                agent_id=obj["agent"]["id"],
                tools=config["tools"],
                listed_after=time.monotonic() + self.config.listing_lag_ms / 1000,
            )
            self.sessions[obj["id"]] = session
            subscriber = None
            if streamed:
                subscriber = queue.Queue()
                session.subscribers.append(subscriber)
                created = {"type": "agent.session.created", "event_id": new_id("evt")}
                subscriber.put({**created, "session": wire_copy(obj)})
            turn = records.start_turn(self.turns, self.items, session, body["input"], script)
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
        only(query, {"after", "limit", "order", "agent_id"})
        with self.cond:
            now = time.monotonic()
            agent_id = query.get("agent_id", [None])[-1]
            visible = [
                s.obj
                for s in self.sessions.values()
                if s.listed_after <= now and (agent_id is None or s.agent_id == agent_id)
            ]
            return page(visible, query)

    # --- turns and items ----------------------------------------------------------------------------------

    def list_turns(self, session_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        only(query, {"after", "limit", "order"})
        with self.cond:
            session = self.session(session_id)
            return page([self.turns[t].obj for t in session.turn_ids], query)

    def get_turn(self, session_id: str, turn_id: str) -> dict[str, Any]:
        with self.cond:
            session = self.session(session_id)
            if turn_id not in session.turn_ids:
                raise ApiError(404, "not_found", f"No turn {turn_id} in {session_id}", "not_found_error")
            return self.turns[turn_id].obj

    def list_items(self, session_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        only(query, {"after", "limit", "order"})
        with self.cond:
            return page(self._items_of(self.session(session_id)), query)

    def _items_of(self, session: Session) -> list[dict[str, Any]]:
        return [self.items[i] for i in session.item_ids]

    # --- input events -------------------------------------------------------------------------------------

    def accept_events(self, session_id: str, body: dict[str, Any], key: str | None) -> Turn | None:
        """Applies input events (202 semantics); returns a turn the caller must start running, if any."""
        only(body, {"events"})
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
                check_input_event(event)
            started = None
            for event in events:
                started = self._apply_input(session, event, key) or started
            if key is not None:
                self.idempotency[(session_id, key)] = fingerprint
            self.cond.notify_all()
            return started

    def _apply_input(self, session: Session, event: dict[str, Any], key: str | None) -> Turn | None:
        active = records.active_turn(self.turns, session)
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
            script = input_script(event["input"], param="events.input")
            if active is not None:
                # Sent while a turn runs, a message steers it: recorded so tests can assert it never happens.
                self.steering.append({"session_id": session.obj["id"], "turn_id": active.obj["id"], "text": script})
                records.add_user_items(self.items, session, active, event["input"])
                return None
            return records.start_turn(self.turns, self.items, session, event["input"], script)
        if kind == "agent.session.input.cancel":
            if active is not None:
                records.finish_turn(self.items, session, active, "cancelled")
                # At once: a later event of the same body may still be refused, and its runner must stop anyway.
                self.cond.notify_all()
            return None
        turn = self.turns.get(event["turn_id"])
        if turn is None or turn.obj["session_id"] != session.obj["id"]:
            raise ApiError(404, "not_found", f"No turn {event['turn_id']}", "not_found_error", param="turn_id")
        call_id = event["call_id"]
        if call_id in turn.answers:
            raise ApiError(409, "tool_result_already_submitted", f"{call_id} already has a result", param="call_id")
        if call_id not in turn.pending_calls or turn.obj["status"] != "waiting":
            raise ApiError(400, "no_pending_function_call", f"Turn does not wait for {call_id}", param="call_id")
        records.answer_call(self.items, session, turn, event)
        return None

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


def _checked_session_create(body: dict[str, Any]) -> tuple[bool, dict[str, Any], str]:
    """Whether the create is streamed, the session's override of its agent and the script of its first turn."""
    only(body, SESSION_CREATE_FIELDS)
    if body.get("environment") != {"type": "none"}:
        raise ApiError(
            400,
            "invalid_environment",
            "environment is required; the double serves {type: none}",
            param="environment",
        )
    streamed = stream_request(body)
    check_metadata(body.get("metadata"))
    override = body.get("agent") or {}
    if not isinstance(override, dict):
        raise ApiError(400, "invalid_type", "agent must be an object", param="agent")
    only(override, AGENT_CONFIGURATION)
    check_tools(override.get("tools"))
    return streamed, override, input_script(body.get("input"), param="input")
