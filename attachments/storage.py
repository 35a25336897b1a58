"""The attachments' store, through Django's storage API (`STORAGES["attachments"]`): the local file system by
default, S3-compatible through django-storages (impo/attachment_settings.py).

Where the client PUTs the bytes differs: an S3 store is given a presigned PUT carrying the SHA-256, so the store
itself refuses other bytes and no web process carries them; the local store gets an Impo URL (attachments/tickets.py).
"""

import base64
import secrets
from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.urls import reverse
from django.utils import timezone
from storages.backends.s3 import S3Storage

from attachments import tickets
from attachments.models import Attachment


def store() -> Storage:
    return storages["attachments"]


def new_key() -> str:
    """Random, and never derived from the file's name or owner: knowing one key tells nothing of another."""
    return f"uploads/{secrets.token_urlsafe(32)}"


def upload_instructions(attachment: Attachment, build_absolute_uri) -> dict:
    """Where and how the client PUTs the manifest's bytes, until when: `{url, method, headers, expiresAt}`."""
    seconds = settings.IMPO_ATTACHMENT_UPLOAD_SECONDS
    expires_at = timezone.now() + timedelta(seconds=seconds)
    headers = {"Content-Type": attachment.media_type}
    target = store()
    if isinstance(target, S3Storage):
        checksum = base64.b64encode(bytes.fromhex(attachment.sha256)).decode()
        headers["x-amz-checksum-sha256"] = checksum
        url = target.connection.meta.client.generate_presigned_url(
            "put_object",
            Params={
                "Bucket": target.bucket_name,
                "Key": attachment.key,
                "ContentType": attachment.media_type,
                "ChecksumSHA256": checksum,
            },
            ExpiresIn=seconds,
        )
    else:
        ticket = tickets.issue(tickets.Ticket(attachment.pk, attachment.size_bytes))
        path = reverse("attachment-upload", kwargs={"attachment_id": attachment.client_id})
        url = build_absolute_uri(f"{path}?{urlencode({'ticket': ticket})}")
    return {"url": url, "method": "PUT", "headers": headers, "expiresAt": expires_at}
