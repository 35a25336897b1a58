"""The attachments API's bodies: the manifest a client prepares, and the typed answers (docs/api.md "Attachments")."""

import re

from django.conf import settings
from rest_framework import serializers

from attachments.models import AttachmentKind, AttachmentStatus
from attachments.selectors import FILE_PART
from core.serializers import CleanTextField, StrictIntegerField, StrictSerializer, StrictUUIDField

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A file's name, not a path: no separator, no control character.
_UNSAFE_NAME = re.compile(r"[/\\\x00-\x1f\x7f]")


class ManifestSerializer(StrictSerializer):
    id = StrictUUIDField(help_text="The client's own id for the file, saved before the first prepare.")
    name = CleanTextField(max_length=255)
    mediaType = serializers.CharField(max_length=100)
    sizeBytes = StrictIntegerField(min_value=1, help_text="At most `maxBytes` (GET /attachments).")
    sha256 = serializers.RegexField(_SHA256, help_text="The SHA-256 of the bytes, in lowercase hex.")

    def validate_name(self, value: str) -> str:
        if _UNSAFE_NAME.search(value) or value.strip() in (".", ".."):
            raise serializers.ValidationError("Must be a file's name, without separators or control characters.")
        return value

    def validate_sizeBytes(self, value: int) -> int:
        if value > settings.IMPO_ATTACHMENT_MAX_BYTES:
            raise serializers.ValidationError(f"Must be at most {settings.IMPO_ATTACHMENT_MAX_BYTES} bytes.")
        return value

    def validate_mediaType(self, value: str) -> str:
        return value.lower()


class UploadQuerySerializer(serializers.Serializer):
    # Optional here so that a method the route does not answer is 405 before the query is judged; a PUT without a
    # ticket is an upload nobody signed (404).
    ticket = serializers.CharField(
        max_length=1000, required=False, default="", help_text="The signed ticket prepare put in the upload URL."
    )


class LimitsSerializer(serializers.Serializer):
    maxBytes = serializers.IntegerField()
    maxFiles = serializers.IntegerField()
    formats = serializers.DictField(child=serializers.CharField(), help_text="Each extension and its media type.")


class FileSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    mediaType = serializers.CharField()
    sizeBytes = serializers.IntegerField()
    sha256 = serializers.CharField()
    status = serializers.ChoiceField(choices=[AttachmentStatus.READY.value])
    kind = serializers.ChoiceField(choices=AttachmentKind.choices)
    width = serializers.IntegerField(required=False, help_text="Images only.")
    height = serializers.IntegerField(required=False, help_text="Images only.")
    pages = serializers.IntegerField(required=False, help_text="PDFs only.")


class UploadSerializer(serializers.Serializer):
    url = serializers.URLField()
    method = serializers.ChoiceField(choices=["PUT"])
    headers = serializers.DictField(
        child=serializers.CharField(), help_text="Send exactly these headers with the bytes (the store checks them)."
    )
    expiresAt = serializers.DateTimeField()


class PreparedSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["upload", "ready"])
    upload = UploadSerializer(required=False, help_text='Where to PUT the bytes (status "upload").')
    file = FileSerializer(required=False, help_text='The completed file (status "ready": a retry after a lost answer).')


class DeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()


class FilePartDataSerializer(serializers.Serializer):
    schemaVersion = serializers.ChoiceField(choices=[1])
    fileId = serializers.CharField(help_text="`upload_<id>`: the bytes are at GET /api/v1/files/{fileId}.")
    name = serializers.CharField()
    mediaType = serializers.CharField()
    sizeBytes = serializers.IntegerField()


class FilePartSerializer(serializers.Serializer):
    """A file a message carries, as history's `parts` and the UI stream's `data-instant-file` chunk show it."""

    type = serializers.ChoiceField(choices=[FILE_PART])
    id = serializers.CharField(help_text="The part's id: its file's `fileId`.")
    data = FilePartDataSerializer()
