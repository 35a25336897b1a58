"""The double's resources as the `openai` SDK types them (`openai.types.beta`): agents, sessions, turns, their ids and
the resolved agent configuration, plus the knobs (`Config`) that pace the echo agent."""

from __future__ import annotations

import json
import queue
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from rebyte.double.checks import only
from rebyte.double.errors import ApiError

TERMINAL_TURN_STATUSES = frozenset({"completed", "failed", "cancelled"})
# What configures an agent: a saved agent's create, and a session's override of it, accept these fields.
AGENT_CONFIGURATION = frozenset(
    {"instructions", "model", "tools", "compaction", "experimental", "multi_agent", "reasoning", "service_tier", "text"}
)
# The literals of the SDK's AgentReasoningParam.
REASONING_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
REASONING_SUMMARIES = frozenset({"concise", "detailed", "auto"})


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def now() -> int:
    return int(time.time())


def wire_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy as the wire would carry it, so an event keeps the state it was sent in."""
    return json.loads(json.dumps(obj))


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


def usage() -> dict[str, Any]:
    return {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }


def agent_config(body: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
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
    only(requested, {"effort", "summary"})
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


def agent_object(body: dict[str, Any]) -> dict[str, Any]:
    created = now()
    return {
        "id": new_id("agent"),
        "object": "agent",
        "created_at": created,
        "updated_at": created,
        "metadata": dict(body.get("metadata") or {}),
        **agent_config(body),
        "name": body.get("name"),
    }


def session_object(body: dict[str, Any], base: dict[str, Any] | None, config: dict[str, Any]) -> dict[str, Any]:
    """A new idle session of the saved agent `base` (or of an agent of its own), configured by `config`."""
    created = now()
    return {
        "id": new_id("sess"),
        "object": "agent.session",
        "agent": {"id": base["id"] if base else new_id("agent"), **config},
        "created_at": created,
        "environment": {"type": "none"},
        "error": None,
        "last_active_at": created,
        "metadata": dict(body.get("metadata") or {}),
        "required_actions": [],
        "spend_control": {"consumed": None, "limit": None},
        "status": "idle",
        "usage": None,
        "vault_ids": list(body.get("vault_ids") or []),
    }


def turn_object(session: Session) -> dict[str, Any]:
    return {
        "id": new_id("turn"),
        "object": "agent.session.turn",
        "agent_id": session.agent_id,
        "session_id": session.obj["id"],
        "status": "queued",
        "created_at": now(),
        "started_at": None,
        "completed_at": None,
        "error": None,
        "usage": None,
    }
