"""The kinds of file Impo takes: each extension with its one media type (docs/design.md §12).

The original also offers `.doc`; no maintained Python library reads the old Word format without a converter
process, so Impo does not offer it rather than take bytes it cannot check.
"""

from attachments.models import AttachmentKind

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

FORMATS = {
    "pdf": "application/pdf",
    "docx": DOCX,
    "txt": "text/plain",
    "md": "text/markdown",
    "csv": "text/csv",
    "json": "application/json",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "gif": "image/gif",
}

# The Pillow format each image type must decode as.
IMAGE_FORMATS = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP", "image/gif": "GIF"}
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv", "application/json"})


def extension(name: str) -> str:
    return name.rpartition(".")[2].lower() if "." in name else ""


def offered(name: str, media_type: str) -> bool:
    """Whether the name's extension and the declared type agree on a format offered here."""
    return FORMATS.get(extension(name)) == media_type


def kind_of(media_type: str) -> AttachmentKind:
    return AttachmentKind.IMAGE if media_type in IMAGE_FORMATS else AttachmentKind.DOCUMENT
