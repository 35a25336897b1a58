"""Drives deleted conversations to their end: runs stopped, remote sessions deleted at the provider under deletion
intents, then the local rows in one transaction (docs/data-lifecycle.md "Deleting").

Woken by a Celery task after the owner's delete commits, and by the sweeper's deletion pass, which is the queue of
record (every deleted conversation not yet purged): a wake-up lost, a worker killed mid-call or a provider away
only delays a deletion. Every step reads its state from the database, so two drivers of one conversation at once
(a wake-up and the sweeper) do no step twice: each remote attempt is claimed first (`rebyte.deletions`).
"""

import logging

from django.conf import settings
from django.db import transaction

from rebyte import deletions as remote_deletions
from rebyte.client import RebyteGateway
from rebyte.failures import ProviderError, Refused
from rebyte.models import DeletionOutcome, IntentKind
from runtime.models import Conversation
from runtime.services import deletion

logger = logging.getLogger(__name__)

# Deleted conversations the sweeper advances per pass (each costs a few queries, plus its provider calls when due).
DELETIONS_PER_SWEEP = 20


def advance(conversation_id, gateway: RebyteGateway) -> bool:
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
    for intent_id in remote_deletions.due_deletion_ids(conversation_id=conversation_id):
        attempt(intent_id, gateway)
    with transaction.atomic(durable=True):
        # Intended again under the locks: a session made meanwhile (a run staff retried) is not left behind.
        if not _sessions_intended(owner_id, conversation_id):
            return False
        if remote_deletions.pending_deletions(conversation_id=conversation_id):
            return False
        remote_deletions.forget_conversation(conversation_id)
        deletion.purge(conversation_id)
    return True


def _sessions_intended(owner_id, conversation_id) -> bool:
    """Stops the conversation's runs and intends the deletion of every session it has; False while a run is active
    (a running turn must be cancelled before its session can be deleted) or a session create of it is in doubt."""
    if deletion.stop_runs(conversation_id) or remote_deletions.session_creation_in_doubt(conversation_id):
        return False
    remote_deletions.intend_session_deletions(owner_id=owner_id, conversation_id=conversation_id)
    return True


def advance_account(owner_id, gateway: RebyteGateway) -> bool:
    """One step of an account's deletion: once every conversation of it is purged, its agents are deleted at the
    provider (the double refuses an agent whose sessions remain, and so it might); then the roof's last step (the
    schedules stopped, the user deleted) is woken. True once nothing of it is left at the provider."""
    with transaction.atomic(durable=True):
        # A conversation opened after the account's deletion was acknowledged (a race with it) goes the same way.
        for conversation_id in deletion.live_conversation_ids(owner_id):
            deletion.delete_conversation(conversation_id)
        if deletion.unpurged_conversations(owner_id) or remote_deletions.agent_creation_in_doubt(owner_id):
            return False
        remote_deletions.intend_agent_deletions(owner_id=owner_id)
    for intent_id in remote_deletions.due_deletion_ids(owner_id=owner_id, kind=IntentKind.AGENT):
        attempt(intent_id, gateway)
    with transaction.atomic(durable=True):
        if remote_deletions.pending_deletions(owner_id=owner_id):
            return False
        remote_deletions.forget_agents(owner_id)
        deletion.hand_over_account(owner_id, rewake_after_seconds=settings.IMPO_REWAKE_AFTER_SECONDS)
    return True


def advance_all(gateway: RebyteGateway) -> int:
    """The sweeper's deletion pass: a step for each of the oldest deleted conversations, then for each account being
    deleted; returns how many conversations were purged. A failure of one (the database, a bug) is logged and the
    others go on."""
    purged = 0
    for conversation_id in deletion.conversations_to_purge(DELETIONS_PER_SWEEP):
        try:
            purged += advance(conversation_id, gateway)
        except Exception:
            logger.exception("deletion of conversation %s failed; the next pass tries again", conversation_id)
    for owner_id in deletion.accounts_to_delete(DELETIONS_PER_SWEEP):
        try:
            advance_account(owner_id, gateway)
        except Exception:
            logger.exception("deletion of account %s failed; the next pass tries again", owner_id)
    return purged


def attempt(intent_id, gateway: RebyteGateway) -> None:
    """One attempt at a remote delete, recorded before the call. After an attempt whose outcome is unknown, the
    resource is read first: a 404 proves the earlier delete happened, so it is never repeated blindly."""
    claimed = remote_deletions.begin_attempt(intent_id)
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
            remote_deletions.settle(intent_id, outcome=DeletionOutcome.GONE)
        else:  # 409: a turn not yet settled at the provider (or, for an agent, sessions left): later
            remote_deletions.defer(intent_id, error=str(error))
    except ProviderError as error:  # unavailable, or the delete's answer lost: read before the next try
        delay = remote_deletions.defer(intent_id, error=str(error))
        logger.warning("delete of %s %s failed (%s); again in %.0f s", claimed.kind, claimed.remote_id, error, delay)
    else:
        remote_deletions.settle(intent_id, outcome=DeletionOutcome.DELETED)
