"""Remote agents and sessions, created at most once each.

A creation intent is committed before the remote create. When the answer is lost, the provider is
searched by the intent's metadata and what exists is adopted; only when nothing exists is it created
again, with the same idempotency key. If even the search fails the intent is left
pending_reconciliation for the reconciler (or a staff member) to settle.
"""

import logging
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from rebyte.client import RebyteAmbiguousOutcome, RebyteClient, RebyteError, RebyteRetryableError
from rebyte.models import (
    OPEN_INTENT_STATES,
    CreationIntent,
    IntentKind,
    IntentState,
    RemoteSession,
    SavedAgent,
    SessionState,
)
from runtime.models import Conversation, ConversationKind

logger = logging.getLogger(__name__)

CHARACTERS_PER_TOKEN = 4


class RemoteCreationPending(Exception):
    """The outcome of a remote create is unknown; the intent waits for reconciliation."""

    def __init__(self, intent: CreationIntent):
        super().__init__(f"{intent.kind} intent {intent.id} is pending reconciliation")
        self.intent = intent


class RemoteCreationFailed(Exception):
    """The provider refused the create outright (not a transport problem): retrying will not help."""


def ensure_saved_agent(owner, client: RebyteClient) -> SavedAgent:
    agent = SavedAgent.objects.filter(owner=owner).first()
    if agent is not None:
        return agent
    intent = _open_intent(owner=owner, kind=IntentKind.AGENT, conversation=None)
    return _realise(intent, client)


def ensure_current_session(conversation: Conversation, client: RebyteClient, *, now: datetime) -> RemoteSession:
    """The session the next turn of this conversation goes to, rotating Main Chat's when it is spent."""
    current = RemoteSession.objects.filter(conversation=conversation, state=SessionState.CURRENT).first()
    if current is not None and conversation.kind == ConversationKind.MAIN_CHAT:
        reason = rotation_reason(current, now=now)
        if reason:
            _retire(current, reason=reason, now=now)
            current = None
    if current is not None:
        return current
    ensure_saved_agent(conversation.owner, client)
    intent = _open_intent(owner=conversation.owner, kind=IntentKind.SESSION, conversation=conversation)
    return _realise(intent, client)


def rotation_reason(session: RemoteSession, *, now: datetime) -> str:
    if (now - session.last_activity_at).total_seconds() >= settings.IMPO_SESSION_MAX_IDLE_SECONDS:
        return "idle"
    if session.turn_count >= settings.IMPO_SESSION_MAX_TURNS:
        return "turns"
    if session.context_estimate >= settings.IMPO_SESSION_MAX_CONTEXT_TOKENS:
        return "context"
    return ""


@transaction.atomic
def record_session_activity(
    session_id: int, *, characters: int, message_sequence: int, now: datetime, new_turn: bool
) -> None:
    """Counts what a session has been sent and has answered; called inside the run's fenced write."""
    session = RemoteSession.objects.select_for_update().get(id=session_id)
    session.turn_count += 1 if new_turn else 0
    session.context_estimate += characters // CHARACTERS_PER_TOKEN
    session.last_activity_at = now
    if session.first_message_sequence is None:
        session.first_message_sequence = message_sequence
    session.last_message_sequence = max(session.last_message_sequence or 0, message_sequence)
    session.save()


def reconcile_intent(intent_id, client: RebyteClient) -> CreationIntent:
    """Settles an open intent by looking up (then, if absent, creating) its remote resource."""
    intent = CreationIntent.objects.get(id=intent_id)
    if intent.state in OPEN_INTENT_STATES:
        try:
            _realise(intent, client)
        except (RemoteCreationPending, RemoteCreationFailed, RebyteRetryableError) as exc:
            logger.info("intent %s not settled yet: %s", intent.id, exc)
    intent.refresh_from_db()
    return intent


def _retire(session: RemoteSession, *, reason: str, now: datetime) -> None:
    # Conditional, so two runs that both see a spent session retire it once.
    RemoteSession.objects.filter(id=session.id, state=SessionState.CURRENT).update(
        state=SessionState.HISTORICAL, rotation_reason=reason, rotated_at=now
    )


def _open_intent(*, owner, kind: str, conversation: Conversation | None) -> CreationIntent:
    """Returns the open intent for this resource, committing a new one if there is none."""
    scope = {"owner": owner} if kind == IntentKind.AGENT else {"conversation": conversation}
    with transaction.atomic(durable=True):
        existing = CreationIntent.objects.filter(kind=kind, state__in=OPEN_INTENT_STATES, **scope).first()
        if existing is not None:
            return existing
        try:
            with transaction.atomic():
                return CreationIntent.objects.create(owner=owner, kind=kind, conversation=conversation)
        except IntegrityError:
            return CreationIntent.objects.get(kind=kind, state__in=OPEN_INTENT_STATES, **scope)


def _realise(intent: CreationIntent, client: RebyteClient):
    remote_id = None
    if intent.attempts:
        # An earlier create was sent (its worker may have died before the answer): look first.
        try:
            remote_id = _find_remote(intent, client)
        except RebyteError as exc:
            _mark_pending(intent, f"lookup failed: {exc}")
            raise RemoteCreationPending(intent) from exc
    if remote_id is None:
        remote_id = _create_remote(intent, client)
    return _adopt(intent, remote_id)


def _create_remote(intent: CreationIntent, client: RebyteClient) -> str:
    # Counted before sending, so a crash mid-request still tells the next attempt to look first.
    CreationIntent.objects.filter(id=intent.id).update(attempts=F("attempts") + 1, updated_at=timezone.now())
    try:
        return _send_create(intent, client)
    except RebyteAmbiguousOutcome as exc:
        logger.warning("create of %s intent %s is ambiguous: %s", intent.kind, intent.id, exc)
        try:
            found = _find_remote(intent, client)
        except RebyteError as lookup_exc:
            _mark_pending(intent, f"create ambiguous ({exc}); lookup failed: {lookup_exc}")
            raise RemoteCreationPending(intent) from lookup_exc
        if found is not None:
            return found
        # The provider holds nothing for this key: the request never took effect, so one more try
        # with the same key is safe; a second ambiguous answer is left for reconciliation.
        try:
            return _send_create(intent, client)
        except RebyteAmbiguousOutcome as again:
            _mark_pending(intent, f"create ambiguous twice: {again}")
            raise RemoteCreationPending(intent) from again
    except RebyteRetryableError:
        # Nothing reached the provider: no ambiguity, the intent stays open and the caller retries.
        raise
    except RebyteError as exc:
        _mark_failed(intent, str(exc))
        raise RemoteCreationFailed(str(exc)) from exc


def _send_create(intent: CreationIntent, client: RebyteClient) -> str:
    if intent.kind == IntentKind.AGENT:
        agent = client.create_agent(f"Impo agent of user {intent.owner_id}", intent.metadata, intent.idempotency_key)
        return agent.id
    agent = SavedAgent.objects.get(owner_id=intent.owner_id)
    return client.create_session(agent.remote_id, intent.metadata, intent.idempotency_key).id


def _find_remote(intent: CreationIntent, client: RebyteClient) -> str | None:
    lookup = {"impo_intent": str(intent.id)}
    found = client.find_agents(lookup) if intent.kind == IntentKind.AGENT else client.find_sessions(lookup)
    if len(found) > 1:
        logger.error("%d remote %ss carry intent %s; adopting the oldest", len(found), intent.kind, intent.id)
    return found[0].id if found else None


def _adopt(intent: CreationIntent, remote_id: str):
    with transaction.atomic(durable=True):
        intent = CreationIntent.objects.select_for_update().get(id=intent.id)
        if intent.state == IntentState.CREATED:
            return _resource_of(intent)
        intent.state = IntentState.CREATED
        intent.remote_id = remote_id
        intent.last_error = ""
        intent.save()
        if intent.kind == IntentKind.AGENT:
            return SavedAgent.objects.create(owner_id=intent.owner_id, remote_id=remote_id, intent=intent)
        return RemoteSession.objects.create(
            conversation_id=intent.conversation_id,
            saved_agent=SavedAgent.objects.get(owner_id=intent.owner_id),
            remote_id=remote_id,
            intent=intent,
            last_activity_at=timezone.now(),
        )


def _resource_of(intent: CreationIntent):
    if intent.kind == IntentKind.AGENT:
        return SavedAgent.objects.get(intent=intent)
    return RemoteSession.objects.get(intent=intent)


def _mark_pending(intent: CreationIntent, error: str) -> None:
    CreationIntent.objects.filter(id=intent.id, state__in=OPEN_INTENT_STATES).update(
        state=IntentState.PENDING_RECONCILIATION, last_error=error, updated_at=timezone.now()
    )


def _mark_failed(intent: CreationIntent, error: str) -> None:
    CreationIntent.objects.filter(id=intent.id, state__in=OPEN_INTENT_STATES).update(
        state=IntentState.FAILED, last_error=error, updated_at=timezone.now()
    )


def reconcile_open_intents(client: RebyteClient, *, limit: int = 50) -> int:
    """The reconciler's pass over intents left pending; returns how many it settled."""
    pending = CreationIntent.objects.filter(state=IntentState.PENDING_RECONCILIATION).order_by("updated_at")
    settled = 0
    for intent_id in pending.values_list("id", flat=True)[:limit]:
        settled += reconcile_intent(intent_id, client).state not in OPEN_INTENT_STATES
    return settled


def staff_adopt_intent(intent_id, *, remote_id: str, actor, note: str) -> None:
    """A staff member confirmed the remote resource exists (id from the provider's console)."""
    intent = CreationIntent.objects.get(id=intent_id)
    _adopt(intent, remote_id)
    CreationIntent.objects.filter(id=intent_id).update(resolved_by=actor, resolution_note=note)


def staff_fail_intent(intent_id, *, actor, note: str) -> bool:
    updated = CreationIntent.objects.filter(id=intent_id, state__in=OPEN_INTENT_STATES).update(
        state=IntentState.FAILED, resolved_by=actor, resolution_note=note, updated_at=timezone.now()
    )
    return bool(updated)
