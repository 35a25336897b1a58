"""Attachments (docs/design.md §12): a file the client names by an id of its own, prepared, uploaded to the store,
then completed once its bytes pass the checks.

The client's id is unique per owner only, so another user preparing the same id makes a file of their own and learns
nothing of this one. The stored object's key is random and never the file's name.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import choice_constraint


class AttachmentStatus(models.TextChoices):
    PENDING = "pending", "waiting for its bytes"
    READY = "ready", "complete"
    # Its deletion is decided (its owner's or the orphan sweep's); the object goes, then the row.
    DELETING = "deleting", "being deleted"


class AttachmentKind(models.TextChoices):
    IMAGE = "image", "image"
    DOCUMENT = "document", "document"


class Attachment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments")
    client_id = models.UUIDField()
    # The manifest, as prepared: the bytes are judged against it at PUT and at complete.
    name = models.CharField(max_length=255)
    media_type = models.CharField(max_length=100)
    size_bytes = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    key = models.CharField(max_length=100, unique=True, editable=False)
    status = models.CharField(max_length=16, choices=AttachmentStatus.choices, default=AttachmentStatus.PENDING)
    # What complete found in the bytes.
    kind = models.CharField(max_length=16, choices=AttachmentKind.choices, blank=True)  # "" until ready
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    pages = models.PositiveIntegerField(null=True, blank=True)
    # A document's text, extracted once at complete within the page and character bounds; `text_cut` says the
    # document held more than was kept.
    text = models.TextField(blank=True)
    text_cut = models.BooleanField(default=False)
    # The messages that carry the file (admission writes these); while any does, it cannot be deleted.
    messages = models.ManyToManyField("runtime.Message", related_name="attachments", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The last prepare or complete: the orphan sweep counts from here, so no upload URL it handed out is still valid.
    touched_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "client_id"], name="attachment_client_id_per_owner"),
            choice_constraint("status", AttachmentStatus, "attachment_status_valid"),
            models.CheckConstraint(condition=Q(size_bytes__gt=0), name="attachment_size_positive"),
            models.CheckConstraint(condition=Q(sha256__regex=r"^[0-9a-f]{64}$"), name="attachment_sha256_hex"),
            # Ready means checked: its kind is known, its completion time set, and an image has its dimensions.
            models.CheckConstraint(
                condition=Q(status=AttachmentStatus.DELETING)
                | Q(status=AttachmentStatus.PENDING, kind="", completed_at__isnull=True)
                | Q(status=AttachmentStatus.READY, kind=AttachmentKind.DOCUMENT, completed_at__isnull=False)
                | Q(
                    status=AttachmentStatus.READY,
                    kind=AttachmentKind.IMAGE,
                    completed_at__isnull=False,
                    width__isnull=False,
                    height__isnull=False,
                ),
                name="attachment_ready_is_checked",
            ),
        ]
        indexes = [models.Index(fields=["status", "touched_at"], name="attachment_sweep")]

    def __str__(self) -> str:
        # Never the name: it is the owner's content (docs/design.md §12, no name in a log).
        return f"attachment {self.client_id}"
