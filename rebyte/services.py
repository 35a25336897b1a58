"""Remote agents and sessions, each created at most once, and the runs' bindings to them (docs/provider.md).

A creation intent is committed before the remote create; the create carries the intent's metadata.
Creates are not idempotent upstream, so after a lost answer the provider's list is read to its end
and the intent's metadata matched exactly, here: a single match is adopted. Listings may lag, so only
a second full listing after a grace period that still finds nothing allows creating again; several
matches, or a lookup that fails, leave the intent pending reconciliation (the sweeper, or staff).
"""

import hashlib
import json
import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from impo.core import telemetry
from impo.core.database import release_connection
from rebyte import locks
from rebyte.client import LiveEvents, RebyteGateway
from rebyte.failures import Refused, Unavailable, UnknownOutcome
from rebyte.instructions import AGENT_INSTRUCTIONS
from rebyte.models import (
    OPEN_INTENT_STATES,
    CreationIntent,
    IntentKind,
    IntentState,
    RemoteSession,
    SavedAgent,
    SessionState,
)
from runtime.models import Run

logger = logging.getLogger(__name__)


class CreationPending(Exception):
    """The outcome of a remote create is unknown; the intent waits for reconciliation."""

    def __init__(self, intent: CreationIntent, reason: str):
        super().__init__(f"{intent.kind} intent {intent.id} is pending reconciliation: {reason}")
        self.intent = intent


class CreationRefused(Exception):
    """The provider refused the create outright (not a transport problem): retrying will not help."""


class AgentGone(Exception):
    """A session create answered 404 and reading the owner's agent answered 404 too: the provider lost the agent.

    Not a doubt but an answer (docs/design.md §5): the agent is marked gone, and the next `ensure_saved_agent` creates a
    new one deliberately."""


def tools_fingerprint(tools: list[dict]) -> str:
    return hashlib.sha256(json.dumps(tools, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# --- agents -------------------------------------------------------------------------------------------


def ensure_saved_agent(owner, gateway: RebyteGateway) -> SavedAgent:
    """The owner's current agent, created if there is none. An agent create in doubt is not waited for: another is
    created deliberately, and the doubtful one, if found later, is recorded and left unused."""
    agent = _current_agent(owner.pk)
    if agent is not None:
        return agent
    with transaction.atomic(durable=True):
        # One run at a time opens the owner's agent create, and it looks for a create in flight before the agent
        # again: one adopted since the read above (its intent no longer in flight) committed with its adoption, so
        # this read of the agent sees it. Otherwise two runs could each miss both and create two agents.
        locks.lock_agent_creation(owner.pk)
        intent = CreationIntent.objects.filter(kind=IntentKind.AGENT, owner=owner, state=IntentState.INTENDED).first()
        if intent is None:
            agent = _current_agent(owner.pk)
            if agent is not None:
                return agent
            # The lock makes this run the only opener: the one-intended-agent constraint cannot refuse it.
            intent = CreationIntent.objects.create(owner=owner, kind=IntentKind.AGENT, conversation=None)
    return realise(intent, gateway)


def _current_agent(owner_id) -> SavedAgent | None:
    return SavedAgent.objects.filter(owner_id=owner_id, gone_at__isnull=True).first()


def _agent_is_gone(agent: SavedAgent, gateway: RebyteGateway) -> bool:
    """Whether the provider definitely lost the agent (reading it answers 404); marks it gone if so."""
    try:
        gateway.get_agent(agent.remote_id)
    except Refused as exc:
        if exc.status != 404:
            raise
        SavedAgent.objects.filter(id=agent.id, gone_at__isnull=True).update(gone_at=timezone.now())
        logger.warning("the provider lost agent %s of user %s: a new one is created", agent.remote_id, agent.owner_id)
        return True
    return False


# --- creation intents ---------------------------------------------------------------------------------


def open_session_intent(run: Run, *, tools: list[dict], instructions: str, input_parts: list[str]) -> CreationIntent:
    """Inside the run's fenced transaction (`run` may be its read-only view): the session this run's input will
    create, with that input; or the run's own create still open (an earlier attempt's), with the input it sent.
    (The owner's agent create is opened by `ensure_saved_agent`.)"""
    request = {"tools": tools, "instructions": instructions, "input_parts": input_parts}
    scope = {"kind": IntentKind.SESSION, "run_id": run.id, "state__in": OPEN_INTENT_STATES}
    intent = CreationIntent.objects.filter(**scope).first()
    if intent is None:
        submission = run.submission
        try:
            with transaction.atomic():
                return CreationIntent.objects.create(
                    owner_id=submission.owner_id,
                    kind=IntentKind.SESSION,
                    conversation_id=submission.conversation_id,
                    run_id=run.id,
                    request=request,
                )
        except IntegrityError:
            intent = CreationIntent.objects.get(**scope)
    if not intent.request:
        intent.request = request
        intent.save(update_fields=["request", "updated_at"])
    return intent


def realise(
    intent: CreationIntent,
    gateway: RebyteGateway,
    *,
    may_create: bool = True,
    on_stream: Callable[[LiveEvents], None] | None = None,
):
    """The intent's resource: found (after an earlier attempt) or created, then adopted. Raises
    CreationPending when that cannot be decided now, CreationRefused when the provider said no, AgentGone
    when a session's agent was lost, and Unavailable when nothing was sent (the caller backs off and tries
    again later). Without `may_create` it only looks: nothing found leaves the intent to staff.

    With `on_stream`, a session is created on its event stream, handed over (to follow its first turn from its
    creation, and to close) as soon as the session is known, before it is adopted; a session found by a lookup comes
    without one."""
    if intent.state == IntentState.CREATED:
        return _resource_of(intent)
    if intent.attempts or not may_create:
        # An earlier create was sent (its worker may have died before the answer): look first.
        found = _lookup(intent, gateway)
        if found is not None:
            return _adopt(intent, found)
        if not may_create:
            _mark_pending(intent, "nothing found, and no longer needed: not created again")
            raise CreationPending(intent, "nothing found")
    return _adopt(intent, _create(intent, gateway, on_stream))


def _create(intent: CreationIntent, gateway: RebyteGateway, on_stream: Callable[[LiveEvents], None] | None) -> str:
    agent = _session_agent(intent) if intent.kind == IntentKind.SESSION else None
    for attempt in (1, 2):
        # Counted before sending, so a crash mid-request still tells the next attempt to look first; and counted
        # only from the count this worker read, so of two runs sharing the intent (the owner's agent) one sends.
        taken = CreationIntent.objects.filter(id=intent.id, attempts=intent.attempts).update(
            attempts=F("attempts") + 1, updated_at=timezone.now()
        )
        if not taken:
            raise Unavailable(f"{intent.kind} intent {intent.id} is being created by another run", operation="create")
        intent.attempts += 1
        try:
            return _send_create(intent, gateway, agent, on_stream)
        except UnknownOutcome as exc:
            logger.warning("create of %s intent %s is ambiguous: %s", intent.kind, intent.id, exc)
            found = _lookup(intent, gateway)
            if found is not None:
                return found
            if attempt == 2:
                _mark_pending(intent, f"create ambiguous twice: {exc}")
                raise CreationPending(intent, "create ambiguous twice") from exc
        except Refused as exc:
            # The only thing a session create names that can be missing is its agent: ask for it.
            if agent is not None and exc.status == 404 and _agent_is_gone(agent, gateway):
                _mark(intent, IntentState.FAILED, f"the agent is gone: {exc}")
                raise AgentGone(str(exc)) from exc
            _mark(intent, IntentState.FAILED, str(exc))
            raise CreationRefused(str(exc)) from exc
    raise AssertionError("unreachable")


def _send_create(
    intent: CreationIntent,
    gateway: RebyteGateway,
    agent: SavedAgent | None,
    on_stream: Callable[[LiveEvents], None] | None,
) -> str:
    if intent.kind == IntentKind.AGENT:
        created = gateway.create_agent(
            model=settings.REBYTE_MODEL,
            name=f"Impo agent of user {intent.owner_id}",
            instructions=AGENT_INSTRUCTIONS,
            metadata=intent.metadata,
        )
        return created.id
    request = {
        "agent_id": agent.remote_id,
        "tools": intent.request["tools"],
        "instructions": session_instructions(intent),
        "input_parts": intent.request["input_parts"],
        "metadata": intent.metadata,
    }
    if on_stream is None:
        return gateway.create_session(**request).id
    opened = gateway.open_session(**request)
    on_stream(opened.events)
    return opened.session.id


def session_instructions(intent: CreationIntent) -> str:
    # An intent recorded before sessions carried their context is sent (again) as it was first sent.
    return intent.request.get("instructions") or AGENT_INSTRUCTIONS


def _session_agent(intent: CreationIntent) -> SavedAgent:
    """The owner's current agent, which a session is created (and looked for) under. Its run ensured one first; if
    it is gone since (another run found it lost), so is this attempt's premise."""
    agent = _current_agent(intent.owner_id)
    if agent is None:
        raise AgentGone(f"the agent of user {intent.owner_id} was found gone")
    return agent


def _lookup(intent: CreationIntent, gateway: RebyteGateway) -> str | None:
    """The one remote resource carrying the intent's metadata, or None after two empty full listings."""
    for listing in (1, 2):
        if listing == 2:
            release_connection()  # the grace is a wait: it holds none of the worker's pooled connections
            time.sleep(settings.IMPO_REBYTE_LISTING_GRACE_SECONDS)
        try:
            matches = _matching(intent, gateway)
        except Unavailable as exc:
            _mark_pending(intent, f"lookup failed: {exc}")
            raise CreationPending(intent, "lookup failed") from exc
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            _mark_pending(intent, f"{len(matches)} remote {intent.kind}s carry this intent: {', '.join(matches)}")
            raise CreationPending(intent, "several remote resources match")
    return None


def _matching(intent: CreationIntent, gateway: RebyteGateway) -> list[str]:
    expected = intent.metadata
    if intent.kind == IntentKind.AGENT:
        candidates = gateway.list_agents()
    else:
        candidates = gateway.list_sessions(_session_agent(intent).remote_id)
    return [c.id for c in candidates if all(c.metadata.get(key) == value for key, value in expected.items())]


def _adopt(intent: CreationIntent, remote_id: str):
    with transaction.atomic():
        intent = locks.lock_intent(intent.id)
        if intent.state == IntentState.CREATED:
            return _resource_of(intent)
        intent.state = IntentState.CREATED
        intent.remote_id = remote_id
        intent.last_error = ""
        # Not the request: a session's carries its tools, which only a create reads.
        intent.save(update_fields=["state", "remote_id", "last_error", "updated_at"])
        if intent.kind == IntentKind.AGENT:
            current_agent = _current_agent(intent.owner_id)
            if current_agent is not None:
                # Found after another was created deliberately while this one was in doubt: recorded, left unused.
                return current_agent
            return SavedAgent.objects.create(owner_id=intent.owner_id, remote_id=remote_id, intent=intent)
        now = timezone.now()
        retired = _retired_on_adoption(intent)
        return RemoteSession.objects.create(
            conversation_id=intent.conversation_id,
            saved_agent=_session_agent(intent),
            remote_id=remote_id,
            intent=intent,
            state=SessionState.HISTORICAL if retired else SessionState.CURRENT,
            rotation_reason=retired,
            rotated_at=now if retired else None,
            tools_fingerprint=tools_fingerprint(intent.request["tools"]),
            last_activity_at=now,
        )


def _retired_on_adoption(intent: CreationIntent) -> str:
    """Why a session found late is recorded as history rather than made current ('' when it is current): the
    conversation moved on to a new one while its run was parked (the run may still follow its turn there), or its
    run ended (the owner cancelled it) and its turn, never shown, must not become the next message's context."""
    if RemoteSession.objects.filter(conversation_id=intent.conversation_id, state=SessionState.CURRENT).exists():
        return "superseded"
    if intent.run is not None and intent.run.is_terminal:
        return "abandoned"
    return ""


def _resource_of(intent: CreationIntent):
    if intent.kind == IntentKind.AGENT:
        return SavedAgent.objects.filter(intent=intent).first() or _current_agent(intent.owner_id)
    return RemoteSession.objects.get(intent=intent)


def _mark_pending(intent: CreationIntent, error: str) -> None:
    _mark(intent, IntentState.PENDING_RECONCILIATION, error)


def _mark(intent: CreationIntent, state: str, error: str) -> None:
    CreationIntent.objects.filter(id=intent.id, state__in=OPEN_INTENT_STATES).update(
        state=state, last_error=error, updated_at=timezone.now()
    )


def _intent_run_trace(intent_id, gateway) -> str:
    # A session is created for one run: settling it belongs to that run's trace. An agent serves many runs.
    return CreationIntent.objects.filter(id=intent_id).values_list("run__traceparent", flat=True).first() or ""


@telemetry.traced(
    "impo.reconcile_intent",
    attributes=lambda intent_id, gateway: {"impo.intent.id": intent_id},
    parent=_intent_run_trace,
    outcome=lambda intent: {"impo.intent.state": intent.state},
)
def reconcile_intent(intent_id, gateway: RebyteGateway) -> CreationIntent:
    """Settles an open intent by looking up (then, if absent, creating) its remote resource."""
    intent = CreationIntent.objects.select_related("run").get(id=intent_id)
    if intent.state in OPEN_INTENT_STATES:
        try:
            realise(intent, gateway, may_create=_still_needed(intent))
        except (CreationPending, CreationRefused, AgentGone, Unavailable) as exc:
            logger.info("intent %s not settled yet: %s", intent.id, exc)
    intent.refresh_from_db()
    return intent


def _still_needed(intent: CreationIntent) -> bool:
    """Whether settling the intent may create its resource again: not once its run ended (the owner cancelled it),
    nor for an agent in doubt that another has replaced; those are only looked up, for the record."""
    if intent.kind == IntentKind.AGENT:
        return _current_agent(intent.owner_id) is None
    return intent.run is None or not intent.run.is_terminal


def reconcile_open_intents(gateway: RebyteGateway, *, limit: int = 50) -> int:
    """The reconciler's pass over intents left pending; returns how many it settled."""
    pending = CreationIntent.objects.filter(state=IntentState.PENDING_RECONCILIATION).order_by("updated_at")
    settled = 0
    for intent_id in pending.values_list("id", flat=True)[:limit]:
        settled += reconcile_intent(intent_id, gateway).state not in OPEN_INTENT_STATES
    return settled


def staff_adopt_intent(intent_id, *, remote_id: str, actor, note: str) -> None:
    """A staff member confirmed the remote resource exists (id from the provider's console)."""
    with transaction.atomic(durable=True):
        _adopt(CreationIntent.objects.get(id=intent_id), remote_id)
        CreationIntent.objects.filter(id=intent_id).update(resolved_by=actor, resolution_note=note)


def staff_fail_intent(intent_id, *, actor, note: str) -> bool:
    updated = CreationIntent.objects.filter(id=intent_id, state__in=OPEN_INTENT_STATES).update(
        state=IntentState.FAILED, resolved_by=actor, resolution_note=note, updated_at=timezone.now()
    )
    return bool(updated)
