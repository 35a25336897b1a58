"""Remote agents and sessions, each created at most once, and the runs' bindings to them (docs/provider.md).

A creation intent is committed before the remote create; the create carries the intent's metadata.
Creates are not idempotent upstream, so after a lost answer the provider's list is read to its end
and the intent's metadata matched exactly, here: a single match is adopted. Listings may lag, so only
a second full listing a grace period after a first empty one, finding nothing either, allows creating
again. Nobody sleeps through the grace: the first empty listing is recorded on the intent, which waits,
pending reconciliation, for the reconciler's next look (docs/provider.md "How long a doubt waits").
A lookup the provider does not answer leaves the intent for the reconciler's next pass
(`rebyte/reconciler.py`); only answers that cannot settle it (several matches, every create of the
intent lost) leave it to staff.
"""

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from rebyte import locks
from rebyte.client import InputPart, LiveEvents, RebyteGateway
from rebyte.failures import Refused, Unavailable, UnknownOutcome
from rebyte.instructions import AGENT_INSTRUCTIONS, agent_instructions
from rebyte.models import (
    OPEN_INTENT_STATES,
    AgentGoneReason,
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


class LookupFailed(CreationPending):
    """The provider did not answer the lookup: nothing was learnt, and looking again is for when it answers."""


class _ProvenAbsent(Exception):
    """Two complete listings a grace period apart found nothing: the resource does not exist."""


# How many times one intent's create is sent. Each lost answer is followed by looks; once this many were all lost and
# nothing was found, the provider keeps answering in a way looks cannot settle, and a person decides.
MAX_CREATES = 3


class CreationRefused(Exception):
    """The provider refused the create outright (not a transport problem): retrying will not help."""


class AgentGone(Exception):
    """A session create answered 404 and reading the owner's agent answered 404 too: the provider lost the agent.

    Not a doubt but an answer (docs/design.md §5): the agent is marked gone, and the next
    `rebyte.agents.ensure_saved_agent` creates a new one deliberately."""


def tools_fingerprint(tools: list[dict]) -> str:
    return hashlib.sha256(json.dumps(tools, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# --- agents (opened by `rebyte.agents`) ----------------------------------------------------------------


def current_agent(owner_id) -> SavedAgent | None:
    """The owner's agent that is not gone, if any."""
    return SavedAgent.objects.select_related("intent").filter(owner_id=owner_id, gone_at__isnull=True).first()


def _agent_is_gone(agent: SavedAgent, gateway: RebyteGateway) -> bool:
    """Whether the provider definitely lost the agent (reading it answers 404); marks it gone if so."""
    try:
        gateway.get_agent(agent.remote_id)
    except Refused as exc:
        if exc.status != 404:
            raise
        SavedAgent.objects.filter(id=agent.id).exclude(gone_reason=AgentGoneReason.LOST).update(
            gone_at=timezone.now(), gone_reason=AgentGoneReason.LOST
        )
        logger.warning("the provider lost agent %s of user %s: a new one is created", agent.remote_id, agent.owner_id)
        return True
    return False


# --- creation intents ---------------------------------------------------------------------------------


# How a session intent's stored input becomes what its create sends (`InputPart`s): the parts the run's driver
# stored may name things only it can read (a message's files, by reference), turned into content at send time.
InputContent = Callable[[list], list[InputPart]]


def open_session_intent(
    run: Run, *, agent: SavedAgent, tools: list[dict], instructions: str, input_parts: list
) -> CreationIntent:
    """Inside the run's fenced transaction (`run` may be its read-only view), the one that marks its input sent: the
    session this run's input will create under `agent`, with that input (texts, and what the driver's `InputContent`
    reads when the create is sent). (The owner's agent create is opened by `rebyte.agents.ensure_saved_agent`.)

    Inserted without looking for one: an earlier attempt's intent was opened in the transaction that marked the
    input sent, so a run whose input has not left has none, and its fence keeps any other attempt from opening
    one meanwhile. Its first create is counted with its insert (see `_create`), for this run to send once the
    transaction commits (`realise(counted=True)`)."""
    submission = run.submission
    return CreationIntent.objects.create(
        owner_id=submission.owner_id,
        kind=IntentKind.SESSION,
        conversation_id=submission.conversation_id,
        run_id=run.id,
        request={"tools": tools, "instructions": instructions, "input_parts": input_parts, "agent": agent.id},
        attempts=1,
    )


def realise(
    intent: CreationIntent,
    gateway: RebyteGateway,
    *,
    may_create: bool = True,
    on_stream: Callable[[LiveEvents], None] | None = None,
    input_content: InputContent | None = None,
    counted: bool = False,
    agent: SavedAgent | None = None,
    run_fence=None,
    then=None,
):
    """The intent's resource: found (after an earlier attempt) or created, then adopted. Raises
    CreationPending when that cannot be decided now, CreationRefused when the provider said no, AgentGone
    when a session's agent was lost, and Unavailable when nothing was sent (the caller backs off and tries
    again later). Without `may_create` it only looks: nothing found leaves the intent to staff. A session's input
    is sent as `input_content` makes it, read at each create; without one, an input of texts alone can be sent.

    With `on_stream`, a session is created on its event stream, handed over (to follow its first turn from its
    creation, and to close) as soon as the session is known, before it is adopted; a session found by a lookup comes
    without one.

    `counted`: the caller inserted the intent with its first create counted (`attempts` 1), committed, and sent
    nothing: that create is sent now, without looking first. `agent`: a session's agent as the caller just ensured it
    (read otherwise). `run_fence`, `then`: the adoption's, as `adopt` takes them (`then` runs in the fence, with the
    resource, if it was adopted before)."""
    adopting = {"agent": agent, "run_fence": run_fence, "then": then}
    if intent.state == IntentState.CREATED:
        resource = _resource_of(intent)
        if then is not None:
            with run_fence():
                then(resource)
        return resource
    if counted:
        return adopt(intent, _create(intent, gateway, on_stream, input_content, agent=agent, counted=True), **adopting)
    if intent.attempts or not may_create:
        # An earlier create was sent (its worker may have died before the answer): look first.
        try:
            return adopt(intent, _lookup(intent, gateway), **adopting)
        except _ProvenAbsent:
            pass
        if not may_create:
            _mark(intent, IntentState.FAILED, "nothing found twice, and no longer needed: not created again")
            raise CreationPending(intent, "nothing found") from None
        if intent.attempts >= MAX_CREATES:
            _mark_pending(intent, f"nothing found after {intent.attempts} creates whose answers were lost", staff=True)
            raise CreationPending(intent, "every create's answer was lost") from None
    return adopt(intent, _create(intent, gateway, on_stream, input_content, agent=agent), **adopting)


def _create(
    intent: CreationIntent,
    gateway: RebyteGateway,
    on_stream: Callable[[LiveEvents], None] | None,
    input_content: InputContent | None,
    *,
    agent: SavedAgent | None,
    counted: bool = False,
) -> str:
    if intent.kind == IntentKind.SESSION:
        agent = agent or _session_agent(intent)
    if (
        agent is not None
        and input_content is None
        and not all(isinstance(part, str) for part in intent.request["input_parts"])
    ):
        # Staff's re-check has no driver to read the message's files: it looks; the sweeper's pass creates.
        raise Unavailable(f"session intent {intent.id} is sent by the run's driver", operation="create")
    # Counted before sending, so a crash mid-request still tells the next attempt to look first; and counted only
    # from the count this worker read, so of two runs sharing the intent (the owner's agent) one sends. A listing
    # made before this create proves nothing about it: the grace starts again. An intent inserted to be sent at
    # once was inserted counted (`counted`), by the one run that sends it.
    if not counted:
        taken = CreationIntent.objects.filter(id=intent.id, attempts=intent.attempts).update(
            attempts=F("attempts") + 1, looked_empty_at=None, updated_at=timezone.now()
        )
        if not taken:
            raise Unavailable(f"{intent.kind} intent {intent.id} is being created by another run", operation="create")
        intent.attempts += 1
        intent.looked_empty_at = None
    try:
        return _send_create(intent, gateway, agent, on_stream, input_content or list)
    except Unavailable as exc:
        if exc.status == 429:
            # Refused before anything was made (docs/provider.md): the create is given back uncounted, so the next
            # attempt (this run's or one waiting for it) sends it rather than looking for what it did not make.
            CreationIntent.objects.filter(id=intent.id, attempts=intent.attempts).update(attempts=F("attempts") - 1)
        raise
    except UnknownOutcome as exc:
        logger.warning("create of %s intent %s is ambiguous: %s", intent.kind, intent.id, exc)
        # Looked at once, which settles a lost answer while the provider otherwise answers; an empty listing here
        # only starts the grace (the intent's looked_empty_at was just cleared), so it never proves absence.
        return _lookup(intent, gateway)
    except Refused as exc:
        # The only thing a session create names that can be missing is its agent: ask for it.
        if agent is not None and exc.status == 404 and _agent_is_gone(agent, gateway):
            _mark(intent, IntentState.FAILED, f"the agent is gone: {exc}")
            raise AgentGone(str(exc)) from exc
        _mark(intent, IntentState.FAILED, str(exc))
        raise CreationRefused(str(exc)) from exc


def _send_create(
    intent: CreationIntent,
    gateway: RebyteGateway,
    agent: SavedAgent | None,
    on_stream: Callable[[LiveEvents], None] | None,
    input_content: InputContent,
) -> str:
    if intent.kind == IntentKind.AGENT:
        created = gateway.create_agent(
            model=settings.REBYTE_MODEL,
            name=f"Impo agent of user {intent.owner_id}",
            instructions=agent_instructions(intent.request.get("ownerInstructions", "")),
            metadata=intent.metadata,
        )
        return created.id
    request = {
        "agent_id": agent.remote_id,
        "tools": intent.request["tools"],
        "instructions": session_instructions(intent),
        "input_parts": input_content(intent.request["input_parts"]),
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
    """The agent a session is created (and looked for) under: the one its run's turn started with (the owner's
    current agent then; one retired since still serves it), or, for an intent from before they were named, the
    current one. If the provider lost it since (another run found it lost), so is this attempt's premise."""
    agents = SavedAgent.objects.exclude(gone_reason=AgentGoneReason.LOST)
    if "agent" in intent.request:
        agent = agents.filter(id=intent.request["agent"]).first()
    else:
        agent = agents.filter(owner_id=intent.owner_id, gone_at__isnull=True).first()
    if agent is None:
        raise AgentGone(f"the agent of user {intent.owner_id} was found gone")
    return agent


def _lookup(intent: CreationIntent, gateway: RebyteGateway) -> str:
    """The one remote resource carrying the intent's metadata. Raises _ProvenAbsent when this complete listing found
    nothing and so did one at least a grace period before it (since the intent's latest create), and CreationPending
    (the intent left pending) otherwise: LookupFailed when the provider did not answer."""
    try:
        matches = _matching(intent, gateway)
    except Unavailable as exc:
        _mark_pending(intent, f"lookup failed: {exc}")
        raise LookupFailed(intent, "lookup failed") from exc
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        found = ", ".join(matches)
        _mark_pending(intent, f"{len(matches)} remote {intent.kind}s carry this intent: {found}", staff=True)
        raise CreationPending(intent, "several remote resources match")
    now = timezone.now()
    grace = timedelta(seconds=settings.IMPO_REBYTE_LISTING_GRACE_SECONDS)
    if intent.looked_empty_at is not None and intent.looked_empty_at <= now - grace:
        raise _ProvenAbsent()
    if intent.looked_empty_at is None:
        # The first empty listing: the second may only be believed a grace period later.
        CreationIntent.objects.filter(id=intent.id, looked_empty_at__isnull=True).update(looked_empty_at=now)
        intent.looked_empty_at = now
    _mark_pending(intent, f"nothing found yet: looking again {grace.total_seconds():g} s after the first empty listing")
    raise CreationPending(intent, "nothing found yet")


def _matching(intent: CreationIntent, gateway: RebyteGateway) -> list[str]:
    expected = intent.metadata
    if intent.kind == IntentKind.AGENT:
        candidates = gateway.list_agents()
    else:
        candidates = gateway.list_sessions(_session_agent(intent).remote_id)
    return [c.id for c in candidates if all(c.metadata.get(key) == value for key, value in expected.items())]


def adopt(intent: CreationIntent, remote_id: str, *, agent: SavedAgent | None = None, run_fence=None, then=None):
    """Records `remote_id` as the intent's resource (once: an intent already created keeps its own); a session's
    under `agent`, the one it was just created under (read when not given).

    `run_fence`: a session's run's fenced transaction (`runtime.services.claims.fenced`, as a callable opening
    it), adopted in instead of a transaction of its own, after the run's lock (docs/locking.md): its run holds its
    lease there, so it has not ended and is not read. `then(resource)` runs in the same transaction."""
    with (run_fence or transaction.atomic)():
        resource = _adopted(intent, remote_id, agent=agent, run_live=run_fence is not None)
        if then is not None:
            then(resource)
        return resource


def _adopted(intent: CreationIntent, remote_id: str, *, agent: SavedAgent | None, run_live: bool):
    intent = locks.lock_intent(intent.id)
    if intent.state == IntentState.CREATED:
        return _resource_of(intent)
    intent.state = IntentState.CREATED
    intent.remote_id = remote_id
    intent.last_error = ""
    # Not the request: a session's carries its tools, which only a create reads.
    intent.save(update_fields=["state", "remote_id", "last_error", "updated_at"])
    if intent.kind == IntentKind.AGENT:
        agent = current_agent(intent.owner_id)
        if agent is not None:
            # Found after another was created deliberately while this one was in doubt: recorded, left unused.
            return agent
        return SavedAgent.objects.create(owner_id=intent.owner_id, remote_id=remote_id, intent=intent)
    now = timezone.now()
    retired = _retired_on_adoption(intent, run_live=run_live)
    return RemoteSession.objects.create(
        conversation_id=intent.conversation_id,
        saved_agent=agent or _session_agent(intent),
        remote_id=remote_id,
        intent=intent,
        state=SessionState.HISTORICAL if retired else SessionState.CURRENT,
        rotation_reason=retired,
        rotated_at=now if retired else None,
        tools_fingerprint=tools_fingerprint(intent.request["tools"]),
        last_activity_at=now,
    )


def _retired_on_adoption(intent: CreationIntent, *, run_live: bool) -> str:
    """Why a session found late is recorded as history rather than made current ('' when it is current): the
    conversation moved on to a new one while its run was parked (the run may still follow its turn there), or its
    run ended (the owner cancelled it) and its turn, never shown, must not become the next message's context. A
    run adopting under its own lease (`run_live`) has not ended."""
    if RemoteSession.objects.filter(conversation_id=intent.conversation_id, state=SessionState.CURRENT).exists():
        return "superseded"
    if not run_live and intent.run is not None and intent.run.is_terminal:
        return "abandoned"
    return ""


def _resource_of(intent: CreationIntent):
    if intent.kind == IntentKind.AGENT:
        return SavedAgent.objects.filter(intent=intent).first() or current_agent(intent.owner_id)
    return RemoteSession.objects.get(intent=intent)


def _mark_pending(intent: CreationIntent, error: str, *, staff: bool = False) -> None:
    """Leaves the intent in doubt: for the reconciler's next look, or (`staff`) for a person, looks being no help."""
    _mark(intent, IntentState.PENDING_RECONCILIATION, error, needs_staff=staff)


def _mark(intent: CreationIntent, state: str, error: str, **fields) -> None:
    CreationIntent.objects.filter(id=intent.id, state__in=OPEN_INTENT_STATES).update(
        state=state, last_error=error, updated_at=timezone.now(), **fields
    )
