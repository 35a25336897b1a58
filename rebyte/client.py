"""Synchronous HTTP client for the Rebyte Agents API (and for its double, `python -m rebyte.double`).

Pure Python (httpx + tenacity), no Django, so workers, scripts and tests can all use it. The surface is
described in rebyte/README.md.

Failure classes matter more than anything else here, because callers build recovery on them:
- `RebyteRetryableError`: nothing happened, or the call is safe to repeat. Idempotent calls (reads,
  cancel, function-call outputs, which the provider deduplicates by call_id) are retried automatically.
- `RebyteAmbiguousOutcome`: a create was sent but its answer was lost, so the object may exist. Creates are
  never retried automatically; the caller must look the object up by its metadata before creating again.
- `RebyteStreamInterrupted`: an event stream ended before a terminal event. The turn keeps running
  remotely; resume with `after=exc.last_sequence`.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

T = TypeVar("T")

TERMINAL_TURN_STATUSES = frozenset({"completed", "failed", "cancelled"})

# Failures that happen before any byte of the request reached the server: nothing can have been created.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


# --- errors --------------------------------------------------------------------------------------------


class RebyteError(Exception):
    def __init__(self, message: str, *, operation: str, status_code: int | None = None, code: str | None = None):
        super().__init__(message)
        self.operation = operation
        self.status_code = status_code
        self.code = code


class RebyteAuthError(RebyteError):
    """401/403: the API key is missing or not accepted."""


class RebyteNotFound(RebyteError):
    """404: the agent, session, turn or function call does not exist."""


class RebyteConflict(RebyteError):
    """409: e.g. a different output for an answered call, or an Idempotency-Key reused with another body."""


class RebyteRetryableError(RebyteError):
    """5xx, 429, timeouts and connection failures on a call that is safe to repeat as it is."""


class RebyteStreamInterrupted(RebyteRetryableError):
    """An event stream ended without a terminal event; the turn may still be running remotely."""

    def __init__(self, message: str, *, turn_id: str, last_sequence: int):
        super().__init__(message, operation="turn_events")
        self.turn_id = turn_id
        self.last_sequence = last_sequence


class RebyteAmbiguousOutcome(RebyteError):
    """A create was sent but no answer arrived (or a 5xx did): the object may exist. Look it up first."""


# --- resources -----------------------------------------------------------------------------------------


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("function-call arguments must be a JSON object")
    return value


@dataclass(frozen=True)
class Agent:
    id: str
    name: str
    model: str
    instructions: str | None
    metadata: dict[str, str]
    created_at: int

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Agent:
        return cls(
            id=data["id"],
            name=data["name"],
            model=data["model"],
            instructions=data.get("instructions"),
            metadata=dict(data.get("metadata") or {}),
            created_at=data["created_at"],
        )


@dataclass(frozen=True)
class Session:
    id: str
    agent_id: str
    status: str  # idle | running | requires_action
    metadata: dict[str, str]
    created_at: int

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Session:
        return cls(
            id=data["id"],
            agent_id=data["agent_id"],
            status=data["status"],
            metadata=dict(data.get("metadata") or {}),
            created_at=data["created_at"],
        )


@dataclass(frozen=True)
class Item:
    """A turn item: `message` (role, status, text), `function_call` (call_id, name, arguments) or
    `function_call_output` (call_id, output)."""

    id: str
    type: str
    role: str | None = None
    status: str | None = None
    text: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | None = None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Item:
        content = data.get("content")
        text = "".join(part.get("text", "") for part in content) if isinstance(content, list) else None
        return cls(
            id=data["id"],
            type=data["type"],
            role=data.get("role"),
            status=data.get("status"),
            text=text,
            call_id=data.get("call_id"),
            name=data.get("name"),
            arguments=data.get("arguments"),
            output=data.get("output"),
        )


@dataclass(frozen=True)
class RequiredAction:
    """A function call the provider waits on; answer it with `submit_function_call_output`."""

    call_id: str
    name: str
    arguments: str  # JSON text

    def parsed_arguments(self) -> dict[str, Any]:
        return _json_object(self.arguments)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> RequiredAction:
        return cls(call_id=data["call_id"], name=data["name"], arguments=data["arguments"])


@dataclass(frozen=True)
class TurnError:
    code: str
    message: str


@dataclass(frozen=True)
class Turn:
    id: str
    session_id: str
    status: str  # queued | running | requires_action | completed | failed | cancelled
    input_text: str
    metadata: dict[str, str]
    output_text: str
    items: tuple[Item, ...]
    required_actions: tuple[RequiredAction, ...]
    error: TurnError | None
    last_sequence: int
    created_at: int
    completed_at: int | None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_TURN_STATUSES

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Turn:
        error = data.get("error")
        return cls(
            id=data["id"],
            session_id=data["session_id"],
            status=data["status"],
            input_text=data["input"],
            metadata=dict(data.get("metadata") or {}),
            output_text=data.get("output_text") or "",
            items=tuple(Item.from_api(item) for item in data.get("items") or ()),
            required_actions=tuple(RequiredAction.from_api(a) for a in data.get("required_actions") or ()),
            error=TurnError(error["code"], error["message"]) if error else None,
            last_sequence=data["last_sequence"],
            created_at=data["created_at"],
            completed_at=data.get("completed_at"),
        )


@dataclass(frozen=True)
class FunctionCallOutputReceipt:
    turn_id: str
    call_id: str
    duplicate: bool  # True when the provider already had this exact output


# --- turn events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TurnEvent:
    """Base of all turn events; also what an event type this client does not know parses to."""

    type: str
    sequence: int  # 1, 2, 3... per turn, no gaps: resume with after=<last seen>
    turn_id: str
    terminal: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class TurnStarted(TurnEvent):
    pass


@dataclass(frozen=True, kw_only=True)
class TextDelta(TurnEvent):
    item_id: str
    delta: str


@dataclass(frozen=True, kw_only=True)
class MessageCompleted(TurnEvent):
    item_id: str
    text: str


@dataclass(frozen=True, kw_only=True)
class FunctionCall(TurnEvent):
    item_id: str
    call_id: str
    name: str
    arguments: str  # JSON text

    def parsed_arguments(self) -> dict[str, Any]:
        return _json_object(self.arguments)


@dataclass(frozen=True, kw_only=True)
class TurnRequiresAction(TurnEvent):
    required_actions: tuple[RequiredAction, ...]


@dataclass(frozen=True, kw_only=True)
class FunctionCallOutputRecorded(TurnEvent):
    item_id: str
    call_id: str
    output: str


@dataclass(frozen=True, kw_only=True)
class TurnCompleted(TurnEvent):
    output_text: str
    terminal: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class TurnFailed(TurnEvent):
    error: TurnError
    terminal: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class TurnCancelled(TurnEvent):
    terminal: ClassVar[bool] = True


def parse_event(data: Mapping[str, Any]) -> TurnEvent:
    base = {"type": data["type"], "sequence": data["sequence"], "turn_id": data["turn_id"]}
    match data["type"]:
        case "turn.started":
            return TurnStarted(**base)
        case "output_text.delta":
            return TextDelta(**base, item_id=data["item_id"], delta=data["delta"])
        case "message.completed":
            return MessageCompleted(**base, item_id=data["item_id"], text=data["text"])
        case "function_call":
            return FunctionCall(
                **base,
                item_id=data["item_id"],
                call_id=data["call_id"],
                name=data["name"],
                arguments=data["arguments"],
            )
        case "turn.requires_action":
            actions = tuple(RequiredAction.from_api(a) for a in data["required_actions"])
            return TurnRequiresAction(**base, required_actions=actions)
        case "function_call_output":
            return FunctionCallOutputRecorded(
                **base, item_id=data["item_id"], call_id=data["call_id"], output=data["output"]
            )
        case "turn.completed":
            return TurnCompleted(**base, output_text=data["output_text"])
        case "turn.failed":
            return TurnFailed(**base, error=TurnError(data["error"]["code"], data["error"]["message"]))
        case "turn.cancelled":
            return TurnCancelled(**base)
        case _:
            return TurnEvent(**base)


def _sse_events(lines: Iterable[str]) -> Iterator[TurnEvent]:
    """Parse Server-Sent Events; every event's `data` is one JSON turn event (id/event lines repeat it)."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield parse_event(json.loads("\n".join(data)))
                data = []
        elif not line.startswith(":"):  # ':' lines are keepalive comments
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value.removeprefix(" "))


# --- client --------------------------------------------------------------------------------------------


def _error_from_response(response: httpx.Response, operation: str, *, idempotent: bool) -> RebyteError:
    status = response.status_code
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    code = error.get("code")
    message = f"{operation}: HTTP {status}: {error.get('message') or response.text[:200]}"
    if status in (401, 403):
        kind: type[RebyteError] = RebyteAuthError
    elif status == 404:
        kind = RebyteNotFound
    elif status == 409:
        kind = RebyteConflict
    elif status == 429 or (status >= 500 and idempotent):
        kind = RebyteRetryableError
    elif status >= 500:
        # A gateway can answer 5xx after the upstream acted, so a failed create proves nothing.
        kind = RebyteAmbiguousOutcome
    else:
        kind = RebyteError
    return kind(message, operation=operation, status_code=status, code=code)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Building a context loads the CA bundle (about 40 ms); a worker opens a client per run, so it is built once.
    return httpx.create_ssl_context()


class RebyteClient:
    """`base_url` includes the API version, e.g. `https://api.rebyte.ai/v1` or `http://127.0.0.1:8765/v1`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        stream_timeout: float = 60.0,
        max_attempts: int = 3,
    ):
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            # No key, no header: the provider answers 401, which surfaces as RebyteAuthError.
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=timeout,
            verify=_tls_context(),
        )
        # A stream is idle between events; the server sends keepalive comments well inside this read timeout.
        self._stream_timeout = httpx.Timeout(timeout, read=stream_timeout)
        self._max_attempts = max_attempts

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RebyteClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- agents ----------------------------------------------------------------------------------------

    def create_agent(
        self,
        name: str,
        metadata: Mapping[str, str],
        idempotency_key: str,
        *,
        model: str | None = None,
        instructions: str | None = None,
    ) -> Agent:
        body: dict[str, Any] = {"name": name, "metadata": dict(metadata)}
        if model is not None:
            body["model"] = model
        if instructions is not None:
            body["instructions"] = instructions
        return Agent.from_api(self._create("create_agent", "/agents", body, idempotency_key))

    def get_agent(self, agent_id: str) -> Agent:
        return Agent.from_api(self._read("get_agent", f"/agents/{agent_id}"))

    def find_agents(self, metadata: Mapping[str, str]) -> list[Agent]:
        return [Agent.from_api(a) for a in self._find("list_agents", "/agents", metadata)]

    # --- sessions --------------------------------------------------------------------------------------

    def create_session(self, agent_id: str, metadata: Mapping[str, str], idempotency_key: str) -> Session:
        body = {"agent_id": agent_id, "metadata": dict(metadata)}
        return Session.from_api(self._create("create_session", "/agents/sessions", body, idempotency_key))

    def get_session(self, session_id: str) -> Session:
        return Session.from_api(self._read("get_session", f"/agents/sessions/{session_id}"))

    def find_sessions(self, metadata: Mapping[str, str], *, agent_id: str | None = None) -> list[Session]:
        extra = {"agent_id": agent_id} if agent_id is not None else {}
        return [Session.from_api(s) for s in self._find("list_sessions", "/agents/sessions", metadata, extra)]

    # --- turns -----------------------------------------------------------------------------------------

    def create_turn(
        self,
        session_id: str,
        input_text: str,
        tools: Sequence[Mapping[str, Any]],
        metadata: Mapping[str, str],
        idempotency_key: str,
    ) -> Turn:
        body = {"input": input_text, "tools": [dict(tool) for tool in tools], "metadata": dict(metadata)}
        path = f"/agents/sessions/{session_id}/turns"
        return Turn.from_api(self._create("create_turn", path, body, idempotency_key))

    def get_turn(self, turn_id: str) -> Turn:
        return Turn.from_api(self._read("get_turn", f"/agents/turns/{turn_id}"))

    def find_turns(self, session_id: str, metadata: Mapping[str, str]) -> list[Turn]:
        found = self._find("list_turns", f"/agents/sessions/{session_id}/turns", metadata)
        return [Turn.from_api(t) for t in found]

    def cancel_turn(self, turn_id: str) -> Turn:
        """Idempotent: a finished turn is returned as it is (a completed turn stays completed)."""
        data = self._retrying(
            lambda: self._send("POST", f"/agents/turns/{turn_id}/cancel", "cancel_turn", idempotent=True)
        )
        return Turn.from_api(data)

    def submit_function_call_output(self, turn_id: str, call_id: str, output: str) -> FunctionCallOutputReceipt:
        """Idempotent on call_id: the same output again is a duplicate; a different one is RebyteConflict."""
        path = f"/agents/turns/{turn_id}/function_call_outputs"
        body = {"call_id": call_id, "output": output}
        data = self._retrying(
            lambda: self._send("POST", path, "submit_function_call_output", idempotent=True, json=body)
        )
        return FunctionCallOutputReceipt(turn_id=data["turn_id"], call_id=data["call_id"], duplicate=data["duplicate"])

    def list_turn_events(self, turn_id: str, after: int = 0) -> list[TurnEvent]:
        """Events recorded so far with sequence > after, without waiting for more."""
        data = self._read(
            "turn_events",
            f"/agents/turns/{turn_id}/events",
            params={"after": after},
            headers={"Accept": "application/json"},
        )
        return [parse_event(event) for event in data["data"]]

    def iter_turn_events(self, turn_id: str, after: int = 0) -> Iterator[TurnEvent]:
        """Stream events with sequence > after until the terminal event.

        Raises RebyteStreamInterrupted (with last_sequence) if the stream ends before a terminal event; the
        turn is not affected, and calling again with after=last_sequence continues without duplicates.
        """
        response = self._retrying(lambda: self._open_stream(turn_id, after))
        last = after
        try:
            for event in _sse_events(response.iter_lines()):
                if event.sequence <= last:  # whatever a server replays, the caller sees each event once
                    continue
                last = event.sequence
                yield event
                if event.terminal:
                    return
        except httpx.TransportError as exc:
            raise RebyteStreamInterrupted(
                f"event stream of {turn_id} broke after sequence {last}: {exc}",
                turn_id=turn_id,
                last_sequence=last,
            ) from exc
        finally:
            response.close()
        raise RebyteStreamInterrupted(
            f"event stream of {turn_id} ended after sequence {last} without a terminal event",
            turn_id=turn_id,
            last_sequence=last,
        )

    # --- plumbing --------------------------------------------------------------------------------------

    def _retrying(self, call: Callable[[], T]) -> T:
        retrying = Retrying(
            stop=stop_after_attempt(self._max_attempts),
            wait=wait_random_exponential(multiplier=0.1, max=2.0),
            retry=retry_if_exception_type(RebyteRetryableError),
            reraise=True,
        )
        return retrying(call)

    def _create(self, operation: str, path: str, body: dict[str, Any], idempotency_key: str) -> Any:
        # Never retried here: only the caller can decide, after looking the object up, to create again.
        headers = {"Idempotency-Key": idempotency_key}
        return self._send("POST", path, operation, idempotent=False, json=body, headers=headers)

    def _read(self, operation: str, path: str, **kwargs: Any) -> Any:
        return self._retrying(lambda: self._send("GET", path, operation, idempotent=True, **kwargs))

    def _find(
        self, operation: str, path: str, metadata: Mapping[str, str], extra: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {f"metadata[{key}]": value for key, value in metadata.items()}
        params.update(extra or {}, limit=100, order="asc")
        found: list[dict[str, Any]] = []
        while True:
            page = self._read(operation, path, params=params)
            found.extend(page["data"])
            if not page["has_more"]:
                return found
            params["after"] = page["last_id"]

    def _send(self, method: str, path: str, operation: str, *, idempotent: bool, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except _NOT_SENT as exc:
            raise RebyteRetryableError(f"{operation}: could not connect: {exc}", operation=operation) from exc
        except httpx.LocalProtocolError as exc:  # we built an invalid request: nothing was sent, retrying won't help
            raise RebyteError(f"{operation}: invalid request: {exc}", operation=operation) from exc
        except httpx.TransportError as exc:
            # The request may have been processed and only the answer lost.
            if idempotent:
                raise RebyteRetryableError(f"{operation}: {exc!r}", operation=operation) from exc
            raise RebyteAmbiguousOutcome(
                f"{operation}: sent, but no answer arrived ({exc!r}); look it up before creating again",
                operation=operation,
            ) from exc
        if response.is_error:
            raise _error_from_response(response, operation, idempotent=idempotent)
        return response.json()

    def _open_stream(self, turn_id: str, after: int) -> httpx.Response:
        request = self._http.build_request(
            "GET",
            f"/agents/turns/{turn_id}/events",
            params={"after": after},
            headers={"Accept": "text/event-stream"},
            timeout=self._stream_timeout,
        )
        try:
            response = self._http.send(request, stream=True)
        except httpx.LocalProtocolError as exc:
            raise RebyteError(f"turn_events: invalid request: {exc}", operation="turn_events") from exc
        except httpx.TransportError as exc:
            raise RebyteRetryableError(f"turn_events: {exc!r}", operation="turn_events") from exc
        if response.is_error:
            response.read()
            response.close()
            raise _error_from_response(response, "turn_events", idempotent=True)
        return response
