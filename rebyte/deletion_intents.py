"""Deletion intents: the durable record of each remote delete at the provider (docs/data-lifecycle.md "Deleting").

An intent is written before its request goes out and settled only by proof: the provider's confirmation, or a 404
from the delete or from a read. Each attempt is recorded (and claimed, by pushing `next_attempt_at` past the attempt's
length) in its own short transaction before the call, so a process that dies mid-call leaves an intent whose next
attempt knows the delete may have happened and reads first. No lock is held across a call.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from rebyte.models import (
    OPEN_INTENT_STATES,
    AgentGoneReason,
    CreationIntent,
    DeletionIntent,
    DeletionOutcome,
    DeletionState,
    IntentKind,
    RemoteSession,
    RemoteTurn,
    SavedAgent,
    SessionState,
)

# An attempt holds its intent for its delete's timeout and this margin: a driver that died mid-call frees it then.
# Should two attempts ever overlap (a read retried past it), the later one's delete is told 404 and settles.
ATTEMPT_MARGIN_SECONDS = 5
# Backoff after a failed attempt: doubling from the base, capped. A provider outage of any length is waited out.
BACKOFF_BASE_SECONDS = 2
BACKOFF_CAP_SECONDS = 300


@dataclass(frozen=True)
class Attempt:
    """An intent claimed for one attempt; `may_have_happened` when an earlier attempt's outcome is unknown."""

    intent_id: object
    kind: str
    remote_id: str
    may_have_happened: bool


def intend_session_deletions(*, owner_id, conversation_id) -> None:
    """One pending intent per session of the conversation the provider may still hold (gone ones are 404 already),
    those it has already left as they are; joins the caller's transaction."""
    sessions = RemoteSession.objects.filter(conversation_id=conversation_id).exclude(state=SessionState.GONE)
    intend_session_deletions_of(owner_id, sessions)


def intend_session_deletions_of(owner_id, sessions) -> None:
    """One pending intent per session of `sessions` (a queryset), each with its conversation; joins the caller's
    transaction."""
    intents = [
        DeletionIntent(owner_id=owner_id, kind=IntentKind.SESSION, conversation_id=conversation_id, remote_id=remote_id)
        for remote_id, conversation_id in sessions.values_list("remote_id", "conversation_id")
    ]
    DeletionIntent.objects.bulk_create(intents, ignore_conflicts=True, unique_fields=["remote_id"])


def intend_agent_deletions(*, owner_id) -> None:
    """One pending intent per agent of the owner the provider may still hold (its current one, and those its new
    instructions retired); joins the caller's transaction."""
    agents = SavedAgent.objects.filter(
        Q(gone_at__isnull=True) | Q(gone_reason=AgentGoneReason.INSTRUCTIONS), owner_id=owner_id
    )
    intents = [
        DeletionIntent(owner_id=owner_id, kind=IntentKind.AGENT, remote_id=remote_id)
        for remote_id in agents.values_list("remote_id", flat=True)
    ]
    DeletionIntent.objects.bulk_create(intents, ignore_conflicts=True, unique_fields=["remote_id"])


def session_creation_in_doubt(conversation_id) -> bool:
    """Whether a session of the conversation may exist that no binding names yet (its create's outcome open): its
    deletion cannot be intended until the reconciliation pass settles that create."""
    return CreationIntent.objects.filter(
        conversation_id=conversation_id, kind=IntentKind.SESSION, state__in=OPEN_INTENT_STATES
    ).exists()


def agent_creation_in_doubt(owner_id) -> bool:
    return CreationIntent.objects.filter(
        owner_id=owner_id, kind=IntentKind.AGENT, state__in=OPEN_INTENT_STATES
    ).exists()


def pending_deletions(**scope) -> bool:
    """Whether any intent in `scope` (a conversation, or an owner and kind) still waits on the provider."""
    return DeletionIntent.objects.filter(state=DeletionState.PENDING, **scope).exists()


def due_deletion_ids(**scope) -> list:
    now = timezone.now()
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    return list(
        DeletionIntent.objects.filter(due, state=DeletionState.PENDING, **scope)
        .order_by("created_at")
        .values_list("id", flat=True)
    )


def forget_conversation(conversation_id) -> None:
    """Removes a deleted conversation's provider bindings (its turns' records, its sessions, their creation intents)
    once none of its sessions is pending deletion; joins the purge's transaction. Its deletion intents stay, the
    record of what was deleted at the provider."""
    RemoteTurn.objects.filter(run__submission__conversation_id=conversation_id).delete()
    RemoteSession.objects.filter(conversation_id=conversation_id).delete()
    CreationIntent.objects.filter(conversation_id=conversation_id).delete()


def forget_agents(owner_id) -> None:
    """Removes a deleted account's agent bindings and their creation intents once none of its agents is pending
    deletion (its conversations' bindings went with them); joins the caller's transaction."""
    SavedAgent.objects.filter(owner_id=owner_id).delete()
    CreationIntent.objects.filter(owner_id=owner_id).delete()


def begin_attempt(intent_id) -> Attempt | None:
    """Claims a due pending intent for one attempt and records it (committed before the call); None when another
    driver holds it, it is not due, or it is settled."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        claimed = DeletionIntent.objects.filter(
            Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now), id=intent_id, state=DeletionState.PENDING
        ).update(attempts=F("attempts") + 1, next_attempt_at=now + _attempt_length(), updated_at=now)
        if not claimed:
            return None
        intent = DeletionIntent.objects.values("kind", "remote_id", "attempts").get(id=intent_id)
    return Attempt(intent_id, intent["kind"], intent["remote_id"], may_have_happened=intent["attempts"] > 1)


def _attempt_length() -> timedelta:
    return timedelta(seconds=settings.REBYTE_TIMEOUT_SECONDS + ATTEMPT_MARGIN_SECONDS)


def settle(intent_id, *, outcome: DeletionOutcome) -> None:
    """The provider no longer holds it: the delete was confirmed, or a read or the delete found it gone."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        DeletionIntent.objects.filter(id=intent_id, state=DeletionState.PENDING).update(
            state=DeletionState.DONE, outcome=outcome, done_at=now, next_attempt_at=None, last_error="", updated_at=now
        )


def defer(intent_id, *, error: str) -> float:
    """The attempt failed (refused for now, unavailable, or its outcome unknown): tried again after a backoff that
    doubles with each attempt. Returns the backoff."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        attempts = DeletionIntent.objects.values_list("attempts", flat=True).get(id=intent_id)
        delay = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, attempts - 1))
        DeletionIntent.objects.filter(id=intent_id, state=DeletionState.PENDING).update(
            next_attempt_at=now + timedelta(seconds=delay), last_error=error[:2000], updated_at=now
        )
    return delay


def attempt_now(intent_ids) -> int:
    """Staff's "attempt again now": the pending intents among these are due at once (the backoff skipped)."""
    with transaction.atomic(durable=True):
        pending = DeletionIntent.objects.filter(id__in=intent_ids, state=DeletionState.PENDING)
        return pending.update(next_attempt_at=None, updated_at=timezone.now())
