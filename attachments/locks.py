"""Every row lock attachments takes (docs/locking.md): the owner's user row first (runtime's `lock_owner`, where a
path counts the owner's files), then their attachment. FOR NO KEY UPDATE where the row changes in place; the orphan
sweep's batch skips what another transaction holds (the next pass finds it). A message's admission shares the
files it links (FOR SHARE), after its conversation: a delete (FOR NO KEY UPDATE) waits for it, then sees the link.
A purge takes the files of its conversation after the conversation too, an account's deletion its owner's alone."""

from django.db import connection
from django.db.models import Subquery

from attachments.models import Attachment, AttachmentStatus


def lock_attachment_for_owner(owner, client_id) -> Attachment | None:
    """The owner's attachment of that client id (in whatever state), or None: another user's is never found."""
    return Attachment.objects.select_for_update(no_key=True).filter(owner=owner, client_id=client_id).first()


def lock_orphans(cutoff, limit: int) -> list[Attachment]:
    """Up to `limit` attachments untouched since `cutoff` that no message carries, not yet being deleted."""
    return list(
        Attachment.objects.select_for_update(no_key=True, skip_locked=True, of=("self",))
        .filter(touched_at__lt=cutoff, messages__isnull=True)
        .exclude(status=AttachmentStatus.DELETING)
        .order_by("id")[:limit]
    )


def lock_carried_in(conversation_id) -> list[int]:
    """The ids of the files messages of the conversation carry, not yet being deleted, in id order."""
    carried = Attachment.messages.through.objects.filter(message__conversation_id=conversation_id)
    return list(
        Attachment.objects.select_for_update(no_key=True)
        .filter(pk__in=Subquery(carried.values("attachment_id")))
        .exclude(status=AttachmentStatus.DELETING)
        .order_by("id")
        .values_list("id", flat=True)
    )


def lock_files_of(owner_id) -> list[int]:
    """The ids of the owner's files not yet being deleted, in id order."""
    return list(
        Attachment.objects.select_for_update(no_key=True)
        .filter(owner_id=owner_id)
        .exclude(status=AttachmentStatus.DELETING)
        .order_by("id")
        .values_list("id", flat=True)
    )


_SHARE_READY_SQL = f"""
SELECT id FROM {Attachment._meta.db_table}
WHERE id = ANY(%s) AND status = %s
ORDER BY id
FOR SHARE
"""


def share_ready_attachments(pks) -> set[int]:
    """Of these attachments, the ids of those still ready, share-locked until commit (in id order): no delete can
    decide about them meanwhile, and a delete committed before the lock leaves its row out (it is re-read)."""
    with connection.cursor() as cursor:
        cursor.execute(_SHARE_READY_SQL, [list(pks), AttachmentStatus.READY.value])
        return {pk for (pk,) in cursor.fetchall()}
