"""The attachments' write paths (docs/design.md §12): prepare, receive the local store's PUT, complete, delete, and
the orphan sweep. Each database write is one transaction; the store is reached outside them, so no row lock waits
on it, and a deletion is decided (DELETING) before its object goes, so a crash between the two is finished by the
sweep, never forgotten."""

import functools
import hashlib
import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.db import DatabaseError, transaction
from django.utils import timezone

from attachments import checks, selectors, tickets
from attachments.formats import kind_of, offered
from attachments.locks import (
    lock_attachment_for_owner,
    lock_carried_in,
    lock_files_of,
    lock_orphans,
    share_ready_attachments,
)
from attachments.models import Attachment, AttachmentStatus
from attachments.storage import new_key, store
from core.error_codes import ErrorCode
from core.errors import ApplicationError, Conflict, NotFound
from runtime.locks import lock_owner

logger = logging.getLogger(__name__)
SWEEP_BATCH = 100


@dataclass(frozen=True)
class Manifest:
    client_id: object
    name: str
    media_type: str
    size_bytes: int
    sha256: str

    def matches(self, attachment: Attachment) -> bool:
        return (self.name, self.media_type, self.size_bytes, self.sha256) == (
            attachment.name,
            attachment.media_type,
            attachment.size_bytes,
            attachment.sha256,
        )


def prepare(*, owner, manifest: Manifest) -> Attachment:
    """The owner's attachment of this manifest: created, or the one prepared before under the same id (a retry)."""
    if not offered(manifest.name, manifest.media_type):
        raise ApplicationError("Impo does not take this kind of file.", code=ErrorCode.UNSUPPORTED_FILE_TYPE)
    with transaction.atomic(durable=True):
        lock_owner(owner)  # the quota's sum and the insert see every other prepare of the owner's
        attachment = lock_attachment_for_owner(owner, manifest.client_id)
        if attachment is not None:
            return _prepared_again(attachment, manifest)
        stored = selectors.stored_bytes_of(owner)
        quota = settings.IMPO_ATTACHMENT_QUOTA_BYTES
        if stored + manifest.size_bytes > quota:
            raise ApplicationError(
                f"Your files would take more than {quota} bytes; delete some first.",
                code=ErrorCode.ATTACHMENT_QUOTA_EXCEEDED,
            )
        return Attachment.objects.create(
            owner=owner,
            client_id=manifest.client_id,
            name=manifest.name,
            media_type=manifest.media_type,
            size_bytes=manifest.size_bytes,
            sha256=manifest.sha256,
            key=new_key(),
            touched_at=timezone.now(),
        )


def _prepared_again(attachment: Attachment, manifest: Manifest) -> Attachment:
    if attachment.status == AttachmentStatus.DELETING:
        raise Conflict("The file of this id is being deleted; use another id.", code=ErrorCode.ATTACHMENT_CONFLICT)
    if not manifest.matches(attachment):
        raise Conflict("This id was prepared with another manifest.", code=ErrorCode.ATTACHMENT_CONFLICT)
    if attachment.status == AttachmentStatus.PENDING:
        # A new upload URL is handed out: the sweep counts from now.
        attachment.touched_at = timezone.now()
        attachment.save(update_fields=["touched_at"])
    return attachment


def receive_upload(*, client_id, token: str, body) -> None:
    """Stores the bytes PUT to a local upload URL once they are exactly the manifest's; refuses any others.

    The body is read in pieces into a temporary file, hashed as it comes, and moved into the store only when it
    matches: the store's object is whole and right, or absent, as an S3 store's checksum makes it there.
    """
    ticket = tickets.read(token)
    attachment = selectors.attachment_for_ticket(ticket) if ticket is not None else None
    if attachment is None or attachment.client_id != client_id:
        raise NotFound("No such upload, or its URL expired; prepare the file again.")
    if attachment.status == AttachmentStatus.READY:
        return  # its bytes are stored and checked; a PUT sent again after a lost answer changes nothing
    with TemporaryUploadedFile("upload", attachment.media_type, attachment.size_bytes, None) as spooled:
        digest, size = hashlib.sha256(), 0
        while piece := body.read(checks.READ_PIECE_BYTES):
            size += len(piece)
            if size > attachment.size_bytes:
                raise ApplicationError("The body is longer than sizeBytes.", code=ErrorCode.INVALID_UPLOAD)
            digest.update(piece)
            spooled.write(piece)
        if size != attachment.size_bytes or digest.hexdigest() != attachment.sha256:
            raise ApplicationError(
                "The body is not the manifest's bytes (its size or SHA-256 differs).", code=ErrorCode.INVALID_UPLOAD
            )
        spooled.seek(0)
        store().save(attachment.key, spooled)


def complete(*, owner, client_id) -> Attachment:
    """The owner's file once its stored bytes pass the checks; bytes that fail are deleted (422)."""
    attachment = selectors.attachment_for_owner(owner, client_id)
    if attachment.status == AttachmentStatus.READY:
        return attachment
    target = store()
    if not target.exists(attachment.key):
        raise Conflict("The file's bytes have not reached the store yet.", code=ErrorCode.UPLOAD_INCOMPLETE)
    try:
        # Few at once in a process: a check holds a decoded image (up to IMPO_ATTACHMENT_MAX_PIXELS) in memory, so
        # ten photos completed together must not hold ten; the others wait their turn.
        with _checks_at_once(), target.open(attachment.key, "rb") as stored:
            findings = checks.inspect(
                stored, media_type=attachment.media_type, size_bytes=attachment.size_bytes, sha256=attachment.sha256
            )
    except checks.Unreadable as unreadable:
        # Bytes of this SHA-256 fail every time, so a concurrent complete of the same bytes cannot have passed them.
        target.delete(attachment.key)
        raise ApplicationError(str(unreadable), code=ErrorCode.ATTACHMENT_UNREADABLE) from unreadable
    return _mark_ready(owner, client_id, findings)


@functools.cache
def _checks_at_once() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(settings.IMPO_ATTACHMENT_CHECKS_AT_ONCE)


@transaction.atomic(durable=True)
def _mark_ready(owner, client_id, findings: checks.Findings) -> Attachment:
    attachment = lock_attachment_for_owner(owner, client_id)
    if attachment is None or attachment.status == AttachmentStatus.DELETING:
        raise NotFound("No such attachment.")
    if attachment.status == AttachmentStatus.READY:
        return attachment  # a concurrent complete of the same bytes was first
    now = timezone.now()
    attachment.status = AttachmentStatus.READY
    attachment.kind = kind_of(attachment.media_type)
    attachment.width, attachment.height, attachment.pages = findings.width, findings.height, findings.pages
    attachment.text, attachment.text_cut = findings.text, findings.text_cut
    attachment.completed_at = attachment.touched_at = now
    attachment.save(
        update_fields=["status", "kind", "width", "height", "pages", "text", "text_cut", "completed_at", "touched_at"]
    )
    return attachment


def attach_to_message(message_id, files: list[Attachment]) -> None:
    """Inside the admission's transaction, after its conversation is locked: links the message to its files (as
    `selectors.files_for_message` read them) once they are share-locked and still ready, so a delete of one either
    committed before (the message is refused: 400 `invalid_attachments`) or waits and then finds the link (409)."""
    if len(share_ready_attachments([attachment.pk for attachment in files])) != len(files):
        raise selectors.unknown_files()
    # The links' ids keep the order the files were sent in (`selectors` reads them by id).
    Link = Attachment.messages.through
    Link.objects.bulk_create([Link(attachment_id=attachment.pk, message_id=message_id) for attachment in files])


def delete(*, owner, client_id) -> None:
    """Deletes the owner's file (refused while a message carries it): decided, then its object, then its row."""
    with transaction.atomic(durable=True):
        attachment = lock_attachment_for_owner(owner, client_id)
        if attachment is None or attachment.status == AttachmentStatus.DELETING:
            raise NotFound("No such attachment.")
        if attachment.messages.exists():
            raise Conflict("A message carries this file.", code=ErrorCode.ATTACHMENT_IN_USE)
        attachment.status = AttachmentStatus.DELETING
        attachment.save(update_fields=["status"])
    _finished(attachment)  # decided: a store that is down only delays the object's removal


def sweep_orphans() -> int:
    """Decides the deletion of every attachment untouched for IMPO_ATTACHMENT_ORPHAN_SECONDS that no message
    carries (never completed, or completed and never sent), then finishes every decided deletion: a crashed one's,
    and those a conversation's purge or an account's deletion decided. Returns how many were deleted."""
    cutoff = timezone.now() - timedelta(seconds=settings.IMPO_ATTACHMENT_ORPHAN_SECONDS)
    while _decide_orphans(cutoff):
        pass
    deleted, _ = finish_deletions()
    return deleted


@transaction.atomic(durable=True)
def _decide_orphans(cutoff) -> int:
    orphans = lock_orphans(cutoff, SWEEP_BATCH)
    Attachment.objects.filter(pk__in=[orphan.pk for orphan in orphans]).update(status=AttachmentStatus.DELETING)
    return len(orphans)


def decide_files_of_purged_conversation(sender, *, conversation_id, **kwargs) -> None:
    """Joins a conversation's purge (`runtime.services.tombstones.conversation_purging`, before its messages go):
    the files its messages carry are decided, except those a message of another conversation still carries, which
    go when the last such message does. The purge runs once no run of the conversation is active, so no worker is
    reading them; their objects go at the next pass that finishes deletions."""
    carried = lock_carried_in(conversation_id)
    elsewhere = Attachment.messages.through.objects.filter(attachment_id__in=carried).exclude(
        message__conversation_id=conversation_id
    )
    Attachment.objects.filter(pk__in=carried).exclude(pk__in=elsewhere.values("attachment_id")).update(
        status=AttachmentStatus.DELETING
    )


def delete_files_of(owner_id) -> bool:
    """An account's deletion: every file of the owner's is decided, in one transaction, then their objects go.
    True once none is left; a store that fails leaves the rest decided for the next attempt."""
    with transaction.atomic(durable=True):
        Attachment.objects.filter(pk__in=lock_files_of(owner_id)).update(status=AttachmentStatus.DELETING)
    _, store_failed = finish_deletions(owner_id=owner_id)
    return not store_failed and not selectors.files_remain(owner_id)


def finish_deletions(*, owner_id=None) -> tuple[int, bool]:
    """Finishes every decided deletion (or one owner's): the object, then the row. A store that fails ends the
    pass: the rows stay decided, so the next pass tries them again and none is forgotten. Returns how many were
    finished and whether the store failed."""
    finished, after_id = 0, 0
    while batch := selectors.being_deleted(SWEEP_BATCH, owner_id=owner_id, after_id=after_id):
        for attachment in batch:
            if not _finished(attachment):
                return finished, True
            finished += 1
        after_id = batch[-1].id
    return finished, False


def _finished(attachment: Attachment) -> bool:
    """`_finish_deletion`, or False when the store fails: logged by the failure's kind only, since the store's
    client names the object (its key) in the message. The row stays decided for a later pass."""
    try:
        _finish_deletion(attachment)
    except DatabaseError:
        raise
    except Exception as error:
        logger.warning("the attachment store failed (%s); a later pass finishes the deletion", type(error).__name__)
        return False
    return True


def _finish_deletion(attachment: Attachment) -> None:
    store().delete(attachment.key)  # a missing object is no error: the object may already be gone
    with transaction.atomic(durable=True):
        Attachment.objects.filter(pk=attachment.pk, status=AttachmentStatus.DELETING).delete()
