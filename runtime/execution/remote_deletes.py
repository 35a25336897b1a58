"""The provider's side of a deletion, driven step by step: a deleted conversation's runs stopped, its remote sessions
deleted at the provider under deletion intents, then its local rows purged in one transaction; and, for an account,
its agents (docs/data-lifecycle.md "Deleting"). The local tombstone and purge are `runtime.services.tombstones`.

Woken by a Celery task after the owner's delete commits, and by the sweeper's deletion pass, which is the queue of
record (every deleted conversation not yet purged): a wake-up lost, a worker killed mid-call or a provider away
only delays a deletion. Every step reads its state from the database, so two drivers of one conversation at once
(a wake-up and the sweeper) do no step twice: each remote attempt is claimed first (`rebyte.deletion_intents`).
"""

import logging

from django.db import transaction

from core.loops import advance_each
from rebyte import agent_retirement, deletion_intents
from rebyte.client import RebyteGateway
from rebyte.failures import ProviderError, Refused
from rebyte.models import DeletionOutcome, IntentKind
from runtime.models import Conversation
from runtime.services import tombstones

logger = logging.getLogger(__name__)

# Deleted conversations the sweeper advances per pass (each costs a few queries, plus its provider calls when due).
DELETIONS_PER_SWEEP = 20


def advance_conversation(conversation_id, gateway: RebyteGateway) -> bool:
    """One step of a deleted conversation's deletion: what is due of it is done; True once it is purged."""
    with transaction.atomic(durable=True):
        owner_id = (
            Conversation.objects.filter(id=conversation_id, deleted_at__isnull=False, purged_at__isnull=True)
            .values_list("owner_id", flat=True)
            .first()
        )
        if owner_id is None:
            return False
        if not _sessions_intended(owner_id, conversation_id):
            return False
    for intent_id in deletion_intents.due_deletion_ids(conversation_id=conversation_id):
        attempt_remote_delete(intent_id, gateway)
    with transaction.atomic(durable=True):
        # Intended again under the locks: a session made meanwhile (a run staff retried) is not left behind.
        if not _sessions_intended(owner_id, conversation_id):
            return False
        if deletion_intents.pending_deletions(conversation_id=conversation_id):
            return False
        deletion_intents.forget_conversation(conversation_id)
        tombstones.purge_conversation(conversation_id)
    return True


def _sessions_intended(owner_id, conversation_id) -> bool:
    """Stops the conversation's runs and intends the deletion of every session it has; False while a run is active
    (a running turn must be cancelled before its session can be deleted) or a session create of it is in doubt."""
    if tombstones.stop_runs(conversation_id) or deletion_intents.session_creation_in_doubt(conversation_id):
        return False
    deletion_intents.intend_session_deletions(owner_id=owner_id, conversation_id=conversation_id)
    return True


def advance_account_remote(owner_id, gateway: RebyteGateway) -> bool:
    """The runtime's step of an account's deletion (driven by `accounts.deletion_driver`): once every conversation
    of it is purged, its agents are deleted at the provider (the double refuses an agent whose sessions remain, and so
    it might). True once nothing of it is left at the provider."""
    with transaction.atomic(durable=True):
        # A conversation opened after the account's deletion was acknowledged (a race with it) goes the same way.
        for conversation_id in tombstones.live_conversation_ids(owner_id):
            tombstones.tombstone_conversation(conversation_id)
        if tombstones.unpurged_conversations(owner_id) or deletion_intents.agent_creation_in_doubt(owner_id):
            return False
        deletion_intents.intend_agent_deletions(owner_id=owner_id)
    for intent_id in deletion_intents.due_deletion_ids(owner_id=owner_id, kind=IntentKind.AGENT):
        attempt_remote_delete(intent_id, gateway)
    with transaction.atomic(durable=True):
        if deletion_intents.pending_deletions(owner_id=owner_id):
            return False
        deletion_intents.forget_agents(owner_id)
        tombstones.mark_account_remote_done(owner_id)
    return True


def advance_retired_agent(agent_id, gateway: RebyteGateway) -> bool:
    """One step of deleting an agent its owner's new instructions retired (`rebyte.agent_retirement`): once no turn
    uses it, its sessions, then the agent. True once the provider no longer holds it."""
    with transaction.atomic(durable=True):
        agent = agent_retirement.intend_deletion(agent_id)
    if agent is None:
        return False
    sessions = {"kind": IntentKind.SESSION, "remote_id__in": agent_retirement.session_remote_ids(agent)}
    for intent_id in deletion_intents.due_deletion_ids(**sessions):
        attempt_remote_delete(intent_id, gateway)
    if deletion_intents.pending_deletions(**sessions):
        return False
    for intent_id in deletion_intents.due_deletion_ids(kind=IntentKind.AGENT, remote_id=agent.remote_id):
        attempt_remote_delete(intent_id, gateway)
    return not deletion_intents.pending_deletions(kind=IntentKind.AGENT, remote_id=agent.remote_id)


def advance_retired_agents(gateway: RebyteGateway) -> int:
    """The sweeper's pass over retired agents: a step for each of the oldest; returns how many are deleted."""
    return advance_each(
        agent_retirement.retired_agent_ids(DELETIONS_PER_SWEEP),
        lambda agent_id: advance_retired_agent(agent_id, gateway),
        what="deletion of retired agent",
    )


def advance_conversations(gateway: RebyteGateway) -> int:
    """The sweeper's deletion pass over conversations: a step for each of the oldest deleted ones; returns how many
    were purged. A failure of one (the database, a bug) is logged and the others go on."""
    conversation_ids = tombstones.conversations_to_purge(DELETIONS_PER_SWEEP)
    return advance_each(
        conversation_ids,
        lambda conversation_id: advance_conversation(conversation_id, gateway),
        what="deletion of conversation",
    )


def attempt_remote_delete(intent_id, gateway: RebyteGateway) -> None:
    """One attempt at a remote delete, recorded before the call. After an attempt whose outcome is unknown, the
    resource is read first: a 404 proves the earlier delete happened, so it is never repeated blindly."""
    claimed = deletion_intents.begin_attempt(intent_id)
    if claimed is None:
        return
    if claimed.kind == IntentKind.SESSION:
        read, delete = gateway.get_session, gateway.delete_session
    else:
        read, delete = gateway.get_agent, gateway.delete_agent
    try:
        if claimed.may_have_happened:
            read(claimed.remote_id)
        delete(claimed.remote_id)
    except Refused as error:
        if error.status == 404:
            deletion_intents.settle(intent_id, outcome=DeletionOutcome.GONE)
        else:  # 409: a turn not yet settled at the provider (or, for an agent, sessions left): later
            deletion_intents.defer(intent_id, error=str(error))
    except ProviderError as error:  # unavailable, or the delete's answer lost: read before the next try
        delay = deletion_intents.defer(intent_id, error=str(error))
        logger.warning("delete of %s %s failed (%s); again in %.0f s", claimed.kind, claimed.remote_id, error, delay)
    else:
        deletion_intents.settle(intent_id, outcome=DeletionOutcome.DELETED)
