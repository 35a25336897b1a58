"""The local side of deleting a conversation, each step joining one transaction: the owner's tombstone, its runs
stopped, and its local rows purged once nothing remote is pending (docs/data-lifecycle.md "Deleting"). The remote
sessions go under deletion intents, driven by `runtime.execution.remote_deletes`, which calls `purge_conversation`
here once they are all settled.

The tombstone (`deleted_at`) is written in the acknowledging transaction, so every owner read (REST, history, the
sockets' checks, streams) treats the conversation as gone from its commit; open sockets and streams are told through
the conversation's push group and close. The row itself stays, emptied, so a repeated delete finds it.
"""

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from core.errors import NotFound
from runtime import locks, outbound
from runtime.models import (
    ACTIVE_RUN_STATES,
    AccountDeletion,
    Conversation,
    ConversationKind,
    Event,
    Message,
    Task,
)
from runtime.services import lifecycle
from tools.models import Note

DELETE_CONVERSATION_TASK = "runtime.delete_conversation"
# Sent by `purge_conversation` inside its transaction, before the messages go, with `conversation_id`: an app above
# runtime whose rows hang on the messages decides their fate there (attachments: the files no other message
# carries), without runtime importing it back.
conversation_purging = Signal()
# What open sockets and streams of a deleted conversation are sent (websocket close code 4404, docs/api.md).
DELETED_MESSAGE = {
    "type": "conversation.deleted",
    "message": "This conversation was deleted.",
}


def delete_task(*, owner, task_id) -> None:
    """The owner deletes a Task's conversation. Idempotent: a Task already deleted is acknowledged again."""
    with transaction.atomic(durable=True):
        conversation_id = Task.objects.filter(id=task_id, owner=owner).values_list("conversation_id", flat=True).first()
        if conversation_id is None:
            raise NotFound("No such task.")
        tombstone_conversation(conversation_id)


def clear_main_chat(*, owner) -> None:
    """The owner's Main Chat is deleted; their next message (or read) opens a new one, with a fresh session.
    Idempotent: with no live Main Chat there is nothing to clear."""
    with transaction.atomic(durable=True):
        live = Conversation.objects.filter(owner=owner, kind=ConversationKind.MAIN_CHAT, deleted_at__isnull=True)
        conversation_id = live.values_list("id", flat=True).first()
        if conversation_id is not None:
            tombstone_conversation(conversation_id)


def tombstone_conversation(conversation_id) -> None:
    """Tombstones the conversation and cancels its active runs (joins the caller's transaction); after commit its
    sockets and streams are told and the deletion is driven. Also what account deletion does for each conversation."""
    stop_runs(conversation_id)
    newly = Conversation.objects.filter(id=conversation_id, deleted_at__isnull=True).update(
        deleted_at=timezone.now(), title=""
    )
    Task.objects.filter(conversation_id=conversation_id).update(title="")
    if newly:
        outbound.publish_deleted(conversation_id, DELETED_MESSAGE)
    wake_deletion(conversation_id)


def stop_runs(conversation_id) -> int:
    """Cancels the conversation's active runs through the one cancel path (joins the caller's transaction): a run
    whose input never left is cancelled on the spot, a running one once its worker relays the cancel to the
    provider. Runs locked first, then the conversation (the order of `runtime.locks`); returns how many are active."""
    runs = locks.lock_runs(submission__conversation_id=conversation_id, state__in=ACTIVE_RUN_STATES)
    locks.lock_conversation(conversation_id)
    for run in runs:
        lifecycle.cancel(run, by_owner=True)
    return sum(not run.is_terminal for run in runs)


def wake_deletion(conversation_id, *, delay_seconds: float = 0) -> None:
    """Wakes a worker to drive the deletion after commit; the sweeper's deletion pass is the queue of record, so a
    wake-up that never left is found there (nothing to mark)."""
    outbound.send_task_after_commit(
        DELETE_CONVERSATION_TASK, conversation_id, mark_unsent=lambda: None, delay_seconds=delay_seconds
    )


def conversations_to_purge(limit: int) -> list:
    """Deleted conversations whose rows are still here, oldest deletion first (the deletion pass's queue)."""
    pending = Conversation.objects.filter(deleted_at__isnull=False, purged_at__isnull=True)
    return list(pending.order_by("deleted_at").values_list("id", flat=True)[:limit])


def purge_conversation(conversation_id) -> None:
    """Removes the deleted conversation's rows (messages, submissions, runs, events, tool calls and the notes they
    saved), joining the caller's transaction, which stopped its runs (`stop_runs`: none active) and removed its
    provider bindings first; the tombstone stays."""
    Note.objects.filter(source_call__run__submission__conversation_id=conversation_id).delete()
    conversation_purging.send(sender=Conversation, conversation_id=conversation_id)
    Message.objects.filter(conversation_id=conversation_id).delete()  # submissions, runs and their rows follow
    Event.objects.filter(conversation_id=conversation_id).delete()
    Conversation.objects.filter(id=conversation_id).update(purged_at=timezone.now())


def tombstone_account_conversations(owner) -> None:
    """The runtime's part of an account's deletion (joins the caller's transaction, which holds the owner's row):
    every live conversation deleted as above, and the account's deletion queued (idempotent). All of the owner's
    active runs are locked first, in id order, so no run is locked after a conversation."""
    locks.lock_runs(submission__conversation__owner=owner, state__in=ACTIVE_RUN_STATES)
    for conversation_id in Conversation.objects.filter(owner=owner, deleted_at__isnull=True).values_list(
        "id", flat=True
    ):
        tombstone_conversation(conversation_id)
    AccountDeletion.objects.get_or_create(owner=owner)


def live_conversation_ids(owner_id) -> list:
    return list(Conversation.objects.filter(owner_id=owner_id, deleted_at__isnull=True).values_list("id", flat=True))


def unpurged_conversations(owner_id) -> bool:
    return Conversation.objects.filter(owner_id=owner_id, purged_at__isnull=True).exists()


def accounts_to_delete(limit: int) -> list:
    """Owners whose account deletion is acknowledged and not finished, oldest first (the deletion pass's queue)."""
    return list(AccountDeletion.objects.order_by("requested_at").values_list("owner_id", flat=True)[:limit])


def mark_account_remote_done(owner_id) -> None:
    """Nothing of the account is left at the provider (joins the caller's transaction); its last step, the user's
    deletion, is the accounts app's (`accounts.deletion_driver`)."""
    AccountDeletion.objects.filter(owner_id=owner_id, remote_done_at__isnull=True).update(remote_done_at=timezone.now())
