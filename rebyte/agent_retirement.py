"""Agents retired by their owner's new instructions (`rebyte.services`), deleted at the provider once no turn uses
them (docs/data-lifecycle.md "Deleting"): the sessions they serve first (the provider may refuse an agent whose
sessions remain), then the agent, each under a deletion intent (`rebyte.deletion_intents`). The provider calls are
the runtime's deletion step's (`runtime.execution.remote_deletes.advance_retired_agents`).

A retired agent is never given a new turn: a turn starts only after comparing its agent's instructions with its
owner's under the instructions lock, and a retired agent never matches. So once the turns already under way on it
have ended (and no create of a session under it is open), nothing more will use it.
"""

from rebyte.deletion_intents import intend_session_deletions_of
from rebyte.models import (
    OPEN_INTENT_STATES,
    AgentGoneReason,
    CreationIntent,
    DeletionIntent,
    DeletionState,
    IntentKind,
    RemoteSession,
    RemoteTurn,
    SavedAgent,
    SessionState,
)
from runtime.models import TERMINAL_RUN_STATES


def retired_agent_ids(limit: int) -> list:
    """Retired agents not yet known deleted at the provider, oldest first."""
    deleted = DeletionIntent.objects.filter(kind=IntentKind.AGENT, state=DeletionState.DONE).values("remote_id")
    return list(
        SavedAgent.objects.filter(gone_reason=AgentGoneReason.INSTRUCTIONS)
        .exclude(remote_id__in=deleted)
        .order_by("gone_at")
        .values_list("id", flat=True)[:limit]
    )


def in_use(agent: SavedAgent) -> bool:
    """Whether a run not yet ended is bound to a session of the agent, or a session create under it is open."""
    turns = RemoteTurn.objects.filter(session__saved_agent=agent).exclude(run__state__in=TERMINAL_RUN_STATES)
    creates = CreationIntent.objects.filter(
        kind=IntentKind.SESSION, state__in=OPEN_INTENT_STATES, owner_id=agent.owner_id, request__agent=agent.id
    )
    return turns.exists() or creates.exists()


def intend_deletion(agent_id) -> SavedAgent | None:
    """In the caller's transaction: once the retired agent is unused, its sessions' deletions and its own are
    intended (its current sessions become history first); the agent, or None while it is in use."""
    agent = SavedAgent.objects.filter(id=agent_id).first()
    if agent is None or in_use(agent):  # gone with its account meanwhile, or still serving a turn
        return None
    sessions = RemoteSession.objects.filter(saved_agent=agent)
    sessions.filter(state=SessionState.CURRENT).update(state=SessionState.HISTORICAL, rotation_reason="instructions")
    intend_session_deletions_of(agent.owner_id, sessions.exclude(state=SessionState.GONE))
    DeletionIntent.objects.bulk_create(
        [DeletionIntent(owner_id=agent.owner_id, kind=IntentKind.AGENT, remote_id=agent.remote_id)],
        ignore_conflicts=True,
        unique_fields=["remote_id"],
    )
    return agent


def session_remote_ids(agent: SavedAgent) -> list[str]:
    return list(RemoteSession.objects.filter(saved_agent=agent).values_list("remote_id", flat=True))
