"""A thin adapter over the official `openai` SDK's Agents API, pointed at Rebyte (docs/provider.md).

It exposes only what Impo needs and sorts every failure into one of the three kinds of `rebyte/failures.py`, which
is all the callers decide on. Pure Python: no Django.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass

import httpx2
import openai
from openai import Stream
from openai.types.beta import Agent, AgentSession, AgentSessionItem
from openai.types.beta.agents.sessions import Turn

from rebyte.failures import ProviderError, Refused, Unavailable, UnknownOutcome, failure_kind
from rebyte.live_event import LiveEvent, from_raw

__all__ = [
    "Agent",
    "AgentSession",
    "AgentSessionItem",
    "LiveEvent",
    "LiveEvents",
    "OpenedSession",
    "RebyteGateway",
    "Turn",
]

PAGE_SIZE = 100
# A scan that would need more pages than this is refused rather than reported as "nothing found".
MAX_PAGES = 100
_REFUSAL_STATUSES = frozenset({400, 401, 403, 404, 409, 413, 422})
# `reasoning.summary` of the SDK's AgentReasoningParam.
REASONING_SUMMARIES = frozenset({"auto", "concise", "detailed"})


@contextmanager
def _translated(operation: str, *, creates: bool = False):
    try:
        yield
    except openai.APIStatusError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        code = body.get("code") if isinstance(body.get("code"), str) else None
        if exc.status_code in _REFUSAL_STATUSES:
            raise Refused(str(exc.message), operation=operation, status=exc.status_code, code=code) from exc
        if creates and exc.status_code != 429:
            # A gateway can fail after the upstream acted: a 5xx to a create proves nothing.
            raise UnknownOutcome(str(exc.message), operation=operation, status=exc.status_code, code=code) from exc
        raise Unavailable(str(exc.message), operation=operation, status=exc.status_code, code=code) from exc
    except openai.APIConnectionError as exc:
        kind = UnknownOutcome if creates else Unavailable
        raise kind(f"{type(exc).__name__}: {exc}", operation=operation) from exc
    except openai.APIResponseValidationError as exc:
        raise Unavailable(f"answer did not match the protocol: {exc}", operation=operation) from exc


def _all_pages(first_page, operation: str) -> list:
    """Every element of a cursor list; a scan that does not finish raises rather than looking empty."""
    found = []
    page = first_page
    for _ in range(MAX_PAGES):
        found.extend(page.data)
        if not page.has_next_page():
            return found
        page = page.get_next_page()
    raise Unavailable(f"more than {MAX_PAGES} pages", operation=operation)


# A part of a user message: a text (sent as its own `input_text`), or a content part as the SDK types it
# (`InputContentParam`: an `input_text` or an `input_image`).
InputPart = str | dict


def user_input(parts: list[InputPart]) -> list[dict]:
    """One user message with each part its own content part, in order (context first, then the user's words and
    files)."""
    content = [part if isinstance(part, dict) else {"type": "input_text", "text": part} for part in parts]
    return [{"role": "user", "content": content}]


# The live streams as the SDK reads them (its request, SSE and JSON decoding, errors), each event its decoded JSON:
# the driver builds only the few fields it reads (`rebyte.live_event`), not the SDK's model of every event.
_RawEvents = Stream[object]


def _untraced(name: str, attributes: dict) -> AbstractContextManager:
    return nullcontext()


class RebyteGateway:
    """`on_failure` hears of every failure as it is sorted (to count them); it must not raise. `span(name,
    attributes)` opens a span around each call (it yields the span, or None) for whoever traces calls.
    `before_call()` runs before each call waits on the network (a caller gives back what it must not hold while
    waiting). `connections` caps the HTTP connections kept to the provider: one per live stream and call in flight.
    `reasoning_summary` (one of REASONING_SUMMARIES, or None for none) is what the sessions it creates ask for.
    `obfuscation` asks event streams for their random padding, which the provider adds unless told not to: read
    server to server over TLS it only costs bytes and parsing, so it is left out by default.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        stream_timeout: float,
        max_retries: int = 2,
        on_failure: Callable[[ProviderError], None] | None = None,
        span: Callable[[str, dict], AbstractContextManager] = _untraced,
        before_call: Callable[[], None] | None = None,
        connections: int | None = None,
        reasoning_summary: str | None = None,
        obfuscation: bool = False,
    ):
        if reasoning_summary is not None and reasoning_summary not in REASONING_SUMMARIES:
            raise ValueError(f"reasoning_summary must be one of {sorted(REASONING_SUMMARIES)} or None")
        self._reasoning_summary = reasoning_summary
        http_client = None
        if connections is not None:
            limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
            http_client = openai.DefaultHttpxClient(limits=limits)
        # Reads and keyed input events may be retried by the SDK itself; creates never are (see below).
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, http_client=http_client
        )
        # The SDK imports its Agents API resources on their first use, about 0.4 s of CPU: done here, so a process
        # that builds its gateway before its first run (a worker, at its start) does not add it to that run.
        self._client.beta.agents.sessions.events  # noqa: B018
        self._stream_timeout = stream_timeout
        self._obfuscation = obfuscation
        self._on_failure = on_failure
        self._span = span
        self._before_call = before_call

    def __enter__(self) -> RebyteGateway:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    @contextmanager
    def _call(self, operation: str, *, creates: bool = False):
        """One provider call: a span of its own, its failure sorted and reported."""
        if self._before_call is not None:
            self._before_call()
        with (
            self._span(f"rebyte.{operation}", {"rebyte.operation": operation}) as span,
            self._reported(span),
            _translated(operation, creates=creates),
        ):
            yield

    @contextmanager
    def _reported(self, span=None):
        try:
            yield
        except ProviderError as error:
            if span is not None:
                span.set_attribute("rebyte.outcome", failure_kind(error))
                if error.status is not None:
                    span.set_attribute("http.response.status_code", error.status)
            if self._on_failure is not None:
                self._on_failure(error)
            raise

    @property
    def _once(self) -> openai.OpenAI:
        # Agent and session creates are not idempotent upstream: an automatic retry could make two.
        return self._client.with_options(max_retries=0)

    # --- agents ---------------------------------------------------------------------------------------

    def create_agent(self, *, model: str, name: str, instructions: str, metadata: dict[str, str]) -> Agent:
        with self._call("create_agent", creates=True):
            return self._once.beta.agents.create(model=model, name=name, instructions=instructions, metadata=metadata)

    def get_agent(self, agent_id: str) -> Agent:
        with self._call("get_agent"):
            return self._client.beta.agents.retrieve(agent_id)

    def delete_agent(self, agent_id: str) -> None:
        """Deletes the agent (its sessions must be deleted first). Like a create, a delete is sent once and a lost
        answer is an unknown outcome: the caller reads (`get_agent`: 404 proves it) before deleting again."""
        with self._call("delete_agent", creates=True):
            self._once.beta.agents.delete(agent_id)

    def probe(self) -> None:
        """Whether the provider answers, at the cost of one page of one agent, asked once: raises Unavailable
        when it does not."""
        with self._call("probe"):
            self._once.beta.agents.list(limit=1)

    def list_agents(self) -> list[Agent]:
        with self._call("list_agents"):
            return _all_pages(self._client.beta.agents.list(order="desc", limit=PAGE_SIZE), "list_agents")

    # --- sessions -------------------------------------------------------------------------------------

    def create_session(self, **request) -> AgentSession:
        """Creates a session whose first turn is the request's `input_parts` (see `_session_request`)."""
        with self._call("create_session", creates=True):
            return self._once.beta.agents.sessions.create(**self._session_request(**request))

    def open_session(self, **request) -> OpenedSession:
        """`create_session` answered as a stream (`stream=True`): the session, known from the stream's first event
        (`agent.session.created`), and the rest of that stream, which carries its first turn from the start. The caller
        closes the events (`with opened.events`). A stream that breaks or ends before the session is known is an
        unknown outcome like any lost create answer."""
        with self._call("create_session", creates=True):
            stream = self._once.beta.agents.sessions.with_raw_response.create(
                **self._session_request(**request),
                stream=True,
                stream_options={"include_obfuscation": self._obfuscation},
                timeout=self._stream_timeout,
            ).parse(to=_RawEvents)
            try:
                first = next(stream, None)
                kind = first.get("type") if isinstance(first, dict) else None
                if kind != "agent.session.created" or not isinstance(first.get("session"), dict):
                    what = "ended" if first is None else f"began with {kind}"
                    raise UnknownOutcome(f"the create's stream {what} before the session", operation="create_session")
            except BaseException:
                stream.close()
                raise
        # The one model of the stream, built as the SDK builds its answers.
        return OpenedSession(AgentSession.construct(**first["session"]), LiveEvents(stream, self._reported))

    def _session_request(
        self,
        *,
        agent_id: str,
        tools: list[dict],
        input_parts: list[InputPart],
        metadata: dict[str, str],
        instructions: str | None = None,
    ) -> dict:
        """A session create's arguments: its first turn is `input_parts`; the session's tools are fixed for its life,
        and `instructions`, when given, stand for the saved agent's in this session (the SDK's session override), as
        the gateway's `reasoning_summary` asks for reasoning summaries on the session's streams."""
        override: dict = {"tools": tools}
        if instructions is not None:
            override["instructions"] = instructions
        if self._reasoning_summary is not None:
            override["reasoning"] = {"summary": self._reasoning_summary}
        return {
            "environment": {"type": "none"},
            "agent_id": agent_id,
            "agent": override,
            "input": user_input(input_parts),
            "metadata": metadata,
        }

    def list_sessions(self, agent_id: str) -> list[AgentSession]:
        with self._call("list_sessions"):
            first = self._client.beta.agents.sessions.list(agent_id=agent_id, order="desc", limit=PAGE_SIZE)
            return _all_pages(first, "list_sessions")

    def get_session(self, session_id: str) -> AgentSession:
        with self._call("get_session"):
            return self._client.beta.agents.sessions.retrieve(session_id)

    def delete_session(self, session_id: str) -> None:
        """Deletes the session (its running turn must be cancelled first: 409 until then). Sent once; a lost answer
        is an unknown outcome, settled by reading (`get_session`: 404 proves the deletion) before deleting again."""
        with self._call("delete_session", creates=True):
            self._once.beta.agents.sessions.delete(session_id)

    # --- turns and items ------------------------------------------------------------------------------

    def list_turns(self, session_id: str) -> list[Turn]:
        with self._call("list_turns"):
            first = self._client.beta.agents.sessions.turns.list(session_id, order="asc", limit=PAGE_SIZE)
            return _all_pages(first, "list_turns")

    def list_items(self, session_id: str) -> list[AgentSessionItem]:
        """The session's items, oldest first. Items change in place: callers reconcile them by id."""
        with self._call("list_items"):
            first = self._client.beta.agents.sessions.items.list(session_id, order="asc", limit=PAGE_SIZE)
            return _all_pages(first, "list_items")

    # --- input events (202, empty body; the Idempotency-Key makes a resend harmless) ---------------------

    def send_message(self, session_id: str, input_parts: list[InputPart], *, idempotency_key: str) -> None:
        event = {"type": "agent.session.input.message", "input": user_input(input_parts)}
        self._send(session_id, event, idempotency_key, "input_message")

    def send_tool_result(
        self, session_id: str, *, turn_id: str, call_id: str, success: bool, text: str, idempotency_key: str
    ) -> None:
        event = {"type": "agent.session.input.tool_result", "turn_id": turn_id, "call_id": call_id, "success": success}
        event["output" if success else "error"] = text
        self._send(session_id, event, idempotency_key, "input_tool_result")

    def send_cancel(self, session_id: str, *, idempotency_key: str) -> None:
        self._send(session_id, {"type": "agent.session.input.cancel"}, idempotency_key, "input_cancel")

    def _send(self, session_id: str, event: dict, idempotency_key: str, operation: str) -> None:
        with self._call(operation):
            self._client.beta.agents.sessions.events.create(session_id, events=[event], idempotency_key=idempotency_key)

    # --- the live stream ------------------------------------------------------------------------------

    @contextmanager
    def live_events(self, session_id: str) -> Iterator[LiveEvents]:
        """The session's live events (no replay); leaving the block closes the stream, never the turn."""
        with self._call("session_events"):
            stream = self._client.beta.agents.sessions.events.with_raw_response.stream(
                session_id, include_obfuscation=self._obfuscation, timeout=self._stream_timeout
            ).parse(to=_RawEvents)
        with LiveEvents(stream, self._reported) as events:
            yield events


@dataclass(frozen=True)
class OpenedSession:
    """A session created with its event stream (`RebyteGateway.open_session`)."""

    session: AgentSession
    events: LiveEvents


class LiveEvents:
    """One open live stream, iterated by one thread; `interrupt()` from another ends that iteration quietly.

    A stream stays open while its session is quiet (the server only sends keepalive comments, which never reach
    the iterator), and closing the response from another thread does not wake a read blocked on its socket: a
    reader left waiting would hold its thread and connection until the session's next event. Shutting the socket
    down does wake it.
    """

    def __init__(self, stream, reported: Callable[[], AbstractContextManager]):
        self._stream = stream
        self._reported = reported
        self._lock = threading.Lock()
        self._interrupted = False
        self._finished = False

    def __iter__(self) -> Iterator[LiveEvent]:
        # Reading the stream is not a call of its own (no span), but a broken stream is a failure like any.
        with self._reported(), _translated("session_events"):
            try:
                for data in self._stream:
                    yield from_raw(data)
            except openai.APIConnectionError:
                if not self._interrupted:
                    raise

    def __enter__(self) -> LiveEvents:
        return self

    def __exit__(self, *exc_info) -> None:
        self.finish()

    def interrupt(self) -> None:
        with self._lock:
            if self._finished:
                return  # its connection may be back in the pool, serving another call
            self._interrupted = True
            network = self._stream.response.extensions.get("network_stream")
            sock = network.get_extra_info("socket") if network is not None else None
            if sock is not None:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self._lock:
            self._finished = True
        self._stream.close()
