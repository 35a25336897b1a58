"""A conversation's remote session between turns: whether the next turn may go to it (or it rotates), what a
completed turn leaves of it (its turn count, its measured context), and its loss upstream. Creating one is a
creation intent's business (`rebyte.services`).
"""

import json
import logging
from datetime import datetime

from django.conf import settings
from django.db.models import Case, F, When

from rebyte.client import RebyteGateway
from rebyte.failures import Refused
from rebyte.models import AgentGoneReason, RemoteSession, SessionState
from rebyte.services import session_instructions
from runtime.models import Conversation, ConversationKind

logger = logging.getLogger(__name__)

BYTES_PER_TOKEN = 3
# Why a session rotates when its agent was made with instructions other than its owner's now.
INSTRUCTIONS_CHANGED = "instructions"


def is_stale(session: RemoteSession, instructions: str) -> bool:
    """Whether the session's agent was made with instructions other than `instructions` (or retired for that): a turn
    that starts now must not go there (its instructions are fixed for the session's life)."""
    agent = session.saved_agent
    return agent.gone_reason == AgentGoneReason.INSTRUCTIONS or agent.owner_instructions != instructions


def usable_session(
    conversation: Conversation, *, fingerprint: str, instructions: str, now: datetime, replacing: str = ""
) -> tuple[RemoteSession | None, bool]:
    """The conversation's current session if the next turn may go to it; a spent one is retired here, and so is one
    holding a turn that the next one replaces (`replacing` says why: "regenerated", "edited"): that turn needs a
    session without it. `instructions` are the owner's now: a session of an agent made with others is spent. With
    it, whether the conversation ever had a session (a new one then carries its last turns): both in one query, the
    current session first."""
    latest = (
        RemoteSession.objects.select_related("intent", "conversation", "saved_agent__intent")
        .filter(conversation=conversation)
        .order_by(Case(When(state=SessionState.CURRENT, then=0), default=1))
        .first()
    )
    if latest is None:
        return None, False
    if latest.state != SessionState.CURRENT:
        return None, True
    reason = replacing or rotation_reason(latest, fingerprint=fingerprint, instructions=instructions, now=now)
    if not reason:
        return latest, True
    retire_session(latest, reason=reason, now=now)
    return None, True


def retire_session(session: RemoteSession, *, reason: str, now: datetime) -> None:
    # Conditional, so two callers that both see a spent session retire it once.
    RemoteSession.objects.filter(id=session.id, state=SessionState.CURRENT).update(
        state=SessionState.HISTORICAL, rotation_reason=reason, rotated_at=now
    )


def rotation_reason(session: RemoteSession, *, fingerprint: str, instructions: str, now: datetime) -> str:
    if session.tools_fingerprint != fingerprint:
        return "tools"
    if is_stale(session, instructions):
        return INSTRUCTIONS_CHANGED
    if session.conversation.kind != ConversationKind.MAIN_CHAT:
        return ""  # a task keeps its one session
    if (now - session.last_activity_at).total_seconds() >= settings.IMPO_SESSION_MAX_IDLE_SECONDS:
        return "idle"
    if session.turn_count >= settings.IMPO_SESSION_MAX_TURNS:
        return "turns"
    if session.context_estimate is None or session.context_estimate >= settings.IMPO_SESSION_MAX_CONTEXT_TOKENS:
        return "context"
    return ""


def session_is_gone(session: RemoteSession, gateway: RebyteGateway) -> bool:
    """Whether the provider definitely lost the session: reading it answers 404. Anything else (5xx, a timeout) is
    no answer and raises, for the caller to back off as from any outage."""
    try:
        gateway.get_session(session.remote_id)
    except Refused as exc:
        if exc.status != 404:
            raise
        return True
    return False


def mark_session_gone(session: RemoteSession, *, now: datetime) -> None:
    """The binding of a session the provider lost; kept, with the message range it served, for the history."""
    RemoteSession.objects.filter(id=session.id).exclude(state=SessionState.GONE).update(
        state=SessionState.GONE, rotation_reason="not_found", rotated_at=now
    )
    logger.warning("the provider lost session %s of conversation %s", session.remote_id, session.conversation_id)


def record_completed_turn(session: RemoteSession, *, items: list, now: datetime) -> None:
    """After a turn of the session completed: count it, reset idleness, and re-measure the context."""
    measured = json.dumps(
        {
            "instructions": session_instructions(session.intent),
            "tools": session.intent.request.get("tools", []),
            "items": [item.model_dump(mode="json") for item in items],
        },
        ensure_ascii=False,
    )
    RemoteSession.objects.filter(id=session.id).update(
        context_estimate=len(measured.encode()) // BYTES_PER_TOKEN,
        turn_count=F("turn_count") + 1,
        last_activity_at=now,
    )
