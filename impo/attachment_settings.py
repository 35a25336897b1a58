"""The attachments' settings (docs/design.md §12, docs/operations.md "Attachments"), read from the environment by
`impo/settings.py`; apart so the settings module stays readable."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

MIB = 1024 * 1024


def attachment_settings(env, base_dir: Path) -> dict:
    """The settings' names and values: the store (`STORAGES["attachments"]`) and the bounds of an upload."""
    values = {
        "IMPO_ATTACHMENT_MAX_BYTES": env.int("IMPO_ATTACHMENT_MAX_BYTES", default=10 * MIB),
        "IMPO_ATTACHMENT_MAX_FILES": env.int("IMPO_ATTACHMENT_MAX_FILES", default=8),
        # What one owner may keep stored at once, completed or still uploading.
        "IMPO_ATTACHMENT_QUOTA_BYTES": env.int("IMPO_ATTACHMENT_QUOTA_BYTES", default=1024 * MIB),
        # An image whose header declares more pixels than this is refused before it is decoded (a decompression bomb).
        "IMPO_ATTACHMENT_MAX_PIXELS": env.int("IMPO_ATTACHMENT_MAX_PIXELS", default=40_000_000),
        # A document's text is read from at most this many pages and kept to this many characters: the bound of
        # the work done at complete and of what reaches the provider.
        "IMPO_ATTACHMENT_MAX_PAGES": env.int("IMPO_ATTACHMENT_MAX_PAGES", default=100),
        "IMPO_ATTACHMENT_TEXT_CHARS": env.int("IMPO_ATTACHMENT_TEXT_CHARS", default=50_000),
        # What a message's files may take of the request that sends it to the provider, shared equally: an image's
        # clean copy is made smaller, a document's text cut, to fit its share (the provider's own bound is unknown;
        # the double takes 1 MiB a request, words and carry included).
        "IMPO_ATTACHMENT_INPUT_BYTES": env.int("IMPO_ATTACHMENT_INPUT_BYTES", default=640 * 1024),
        # How many files a web process checks at once at complete (each may hold a decoded image); more wait.
        "IMPO_ATTACHMENT_CHECKS_AT_ONCE": env.int("IMPO_ATTACHMENT_CHECKS_AT_ONCE", default=2),
        # How long an upload URL is valid; the local store's PUT also gets this rate's time for its body, so a slow
        # phone link finishes while a trickling client is still cut off.
        "IMPO_ATTACHMENT_UPLOAD_SECONDS": env.int("IMPO_ATTACHMENT_UPLOAD_SECONDS", default=3600),
        "IMPO_ATTACHMENT_UPLOAD_BYTES_PER_SECOND": env.int(
            "IMPO_ATTACHMENT_UPLOAD_BYTES_PER_SECOND", default=64 * 1024
        ),
        # An upload never completed, or completed and never sent, is deleted this long after its last prepare or
        # complete.
        "IMPO_ATTACHMENT_ORPHAN_SECONDS": env.int("IMPO_ATTACHMENT_ORPHAN_SECONDS", default=24 * 3600),
    }
    if values["IMPO_ATTACHMENT_ORPHAN_SECONDS"] <= values["IMPO_ATTACHMENT_UPLOAD_SECONDS"]:
        # The sweep may then delete an upload whose URL is still valid, and a PUT could store bytes nothing owns.
        raise ImproperlyConfigured("IMPO_ATTACHMENT_ORPHAN_SECONDS must exceed IMPO_ATTACHMENT_UPLOAD_SECONDS")
    return {**values, "STORAGES": _storages(env, base_dir)}


def _storages(env, base_dir: Path) -> dict:
    store = env("IMPO_ATTACHMENT_STORE", default="local")
    if store == "local":
        attachments = {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            # Overwritten in place: a PUT sent again after a lost answer writes the same verified bytes to one key.
            "OPTIONS": {
                "location": env("IMPO_ATTACHMENT_DIR", default=str(base_dir / "var" / "attachments")),
                "allow_overwrite": True,
                "file_permissions_mode": 0o600,
                "directory_permissions_mode": 0o700,
            },
        }
    elif store == "s3":
        # Credentials come from boto3's own chain (AWS_ACCESS_KEY_ID, an instance role, …), never from here.
        attachments = {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": env("IMPO_ATTACHMENT_S3_BUCKET"),
                "endpoint_url": env("IMPO_ATTACHMENT_S3_ENDPOINT", default=None),
                "region_name": env("IMPO_ATTACHMENT_S3_REGION", default=None),
                "default_acl": "private",
                # SigV4 presigned URLs sign the checksum header: a PUT without it, or with other bytes, is refused.
                "signature_version": "s3v4",
                "querystring_auth": True,
                "file_overwrite": True,
            },
        }
    else:
        raise ImproperlyConfigured("IMPO_ATTACHMENT_STORE must be 'local' or 's3'")
    return {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "attachments": attachments,
    }
