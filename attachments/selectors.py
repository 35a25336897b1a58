"""Reads of attachments, always scoped to their owner, and their wire shapes."""

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Exists, OuterRef, Q, Sum

from attachments.formats import FORMATS
from attachments.models import Attachment, AttachmentStatus
from core.error_codes import ErrorCode
from core.errors import ApplicationError, Conflict, NotFound

FILE_PART = "data-instant-file"


def limits() -> dict:
    return {
        "maxBytes": settings.IMPO_ATTACHMENT_MAX_BYTES,
        "maxFiles": settings.IMPO_ATTACHMENT_MAX_FILES,
        "formats": dict(FORMATS),
    }


def attachment_for_owner(owner, client_id) -> Attachment:
    """The owner's attachment; another user's, a missing one and one being deleted are all not found."""
    attachment = (
        Attachment.objects.filter(owner=owner, client_id=client_id).exclude(status=AttachmentStatus.DELETING).first()
    )
    if attachment is None:
        raise NotFound("No such attachment.")
    return attachment


def ready_attachment_for_owner(owner, client_id) -> Attachment:
    attachment = attachment_for_owner(owner, client_id)
    if attachment.status != AttachmentStatus.READY:
        raise NotFound("No such file.")
    return attachment


def attachment_for_ticket(ticket) -> Attachment | None:
    """The attachment an upload ticket was signed for (attachments/tickets.py), unless it is being deleted."""
    return Attachment.objects.filter(pk=ticket.attachment_pk).exclude(status=AttachmentStatus.DELETING).first()


def stored_bytes_of(owner) -> int:
    """What the owner's files take in the store, counted against their quota (those being deleted aside)."""
    stored = Attachment.objects.filter(owner=owner).exclude(status=AttachmentStatus.DELETING)
    return stored.aggregate(total=Sum("size_bytes"))["total"] or 0


def being_deleted(limit: int, *, owner_id=None, after_id: int = 0) -> list[Attachment]:
    """Decided deletions (of one owner, or all), in id order after `after_id`."""
    rows = Attachment.objects.filter(status=AttachmentStatus.DELETING, id__gt=after_id)
    if owner_id is not None:
        rows = rows.filter(owner_id=owner_id)
    return list(rows.order_by("id")[:limit])


def files_remain(owner_id) -> bool:
    """Whether any file of the owner's is still here, in whatever state (an account's deletion waits for none)."""
    return Attachment.objects.filter(owner_id=owner_id).exists()


def file_to_wire(attachment: Attachment) -> dict:
    """A ready file as the API shows it; an image's dimensions and a PDF's pages only where they exist."""
    wire = {
        "id": attachment.client_id,
        "name": attachment.name,
        "mediaType": attachment.media_type,
        "sizeBytes": attachment.size_bytes,
        "sha256": attachment.sha256,
        "status": attachment.status,
        "kind": attachment.kind,
    }
    found = {"width": attachment.width, "height": attachment.height, "pages": attachment.pages}
    return wire | {name: value for name, value in found.items() if value is not None}


def unknown_files() -> ApplicationError:
    """The refusal of a message naming a file that is none of its sender's (or no longer is)."""
    return ApplicationError("attachmentIds: No such file.", code=ErrorCode.INVALID_ATTACHMENTS)


def ready_files_after(owner_id, after_id: int, limit: int) -> list[tuple[int, str, dict]]:
    """A page of the owner's ready files for the export, in id order after `after_id`: each file's id, its
    object's key (to read its bytes; never shown) and its wire shape with the messages that carry it. A file only
    deleted conversations carry is left out with them (it goes when they are purged)."""
    through = Attachment.messages.through.objects
    live = through.filter(message__conversation__deleted_at__isnull=True)
    carried = Exists(through.filter(attachment_id=OuterRef("pk")))
    kept = ~Q(carried) | Q(Exists(live.filter(attachment_id=OuterRef("pk"))))
    ready = Attachment.objects.filter(owner_id=owner_id, status=AttachmentStatus.READY, id__gt=after_id)
    files = list(ready.filter(kept).order_by("id")[:limit])
    carriers: dict[int, list[str]] = {}
    through = live.filter(attachment_id__in=[file.id for file in files])
    for attachment_id, message_id in through.order_by("message__sequence").values_list("attachment_id", "message_id"):
        carriers.setdefault(attachment_id, []).append(str(message_id))
    return [
        (
            file.id,
            file.key,
            file_to_wire(file)
            | {
                "id": str(file.client_id),
                "fileId": f"upload_{file.client_id}",
                "createdAt": file.created_at.isoformat(),
                "completedAt": file.completed_at.isoformat(),
                "messageIds": carriers.get(file.id, []),
            },
        )
        for file in files
    ]


def files_for_message(owner, client_ids) -> list[Attachment]:
    """The owner's files a message names, in its order: each must be the owner's (another user's id, an unknown
    one and one being deleted are all 400 `invalid_attachments`) and complete (409 `upload_incomplete`). Read
    without a lock: admission locks them once the conversation is (`attachments.services.attach_to_message`)."""
    found = {
        attachment.client_id: attachment
        for attachment in Attachment.objects.filter(owner=owner, client_id__in=client_ids).exclude(
            status=AttachmentStatus.DELETING
        )
    }
    if len(found) != len(client_ids):
        raise unknown_files()
    files = [found[client_id] for client_id in client_ids]
    if any(attachment.status != AttachmentStatus.READY for attachment in files):
        raise Conflict("attachmentIds: A file's upload is not complete yet.", code=ErrorCode.UPLOAD_INCOMPLETE)
    return files


def file_part(attachment: Attachment) -> dict:
    """A file a message carries, as history's `parts` and the UI stream show it (docs/api.md "Messages with
    files"): the original's `data-instant-file` part, whose `fileId` names its bytes at `/api/v1/files/{fileId}`."""
    file_id = f"upload_{attachment.client_id}"
    return {
        "type": FILE_PART,
        "id": file_id,
        "data": {
            "schemaVersion": 1,
            "fileId": file_id,
            "name": attachment.name,
            "mediaType": attachment.media_type,
            "sizeBytes": attachment.size_bytes,
        },
    }


def _links_in_order(message_ids):
    # A message's links are written in the order its files were sent (`services.attach_to_message`): their ids keep it.
    return Attachment.messages.through.objects.filter(message_id__in=message_ids).order_by("id")


def file_ids_in_order(message: OuterRef) -> ArraySubquery:
    """For a query of rows that reach a message (`message`, its id as an OuterRef): the ids of its files, in the order
    sent, as one array read with the row."""
    return ArraySubquery(
        Attachment.messages.through.objects.filter(message_id=message).order_by("id").values("attachment_id")
    )


def files_by_message(message_ids) -> dict:
    """{message id: its files, in the order sent}, for any number of messages in one query."""
    links = _links_in_order(message_ids).select_related("attachment")
    files: dict = {}
    for link in links:
        files.setdefault(link.message_id, []).append(link.attachment)
    return files


def file_parts_of(message_id) -> list[dict]:
    """A message's files as their parts, in the order sent."""
    return [file_part(attachment) for attachment in files_by_message([message_id]).get(message_id, [])]
