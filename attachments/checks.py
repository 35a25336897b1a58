"""What complete learns from a file's bytes, never from its name (docs/design.md §12): the content must be what the
declared type says, read by maintained libraries (Pillow, pypdf, python-docx), within bounds of pixels, pages and
characters. A file that fails raises `Unreadable` with a reason safe to show its owner (no content in it)."""

import hashlib
import json
import tempfile
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

import docx
import docx.opc.exceptions
import pypdf
from django.conf import settings
from PIL import Image, UnidentifiedImageError

from attachments.formats import DOCX, IMAGE_FORMATS, TEXT_TYPES

# What the parsers raise on hostile or broken input besides their own errors: pypdf and python-docx walk object
# graphs a file describes, and a malformed one ends in the lookup or type errors of that walk.
_MALFORMED = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    RecursionError,
    SyntaxError,
    zipfile.BadZipFile,
)


class Unreadable(Exception):
    """The bytes fail a check; the message says which, in words for the owner."""


@dataclass(frozen=True)
class Findings:
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    text: str = ""
    text_cut: bool = False


# How much of a file is held in memory while it is checked; the rest waits in a temporary file.
SPOOL_BYTES = 1024 * 1024
READ_PIECE_BYTES = 64 * 1024


def inspect(stored: BinaryIO, *, media_type: str, size_bytes: int, sha256: str) -> Findings:
    """The findings of a stored file's bytes, once they are the manifest's size and SHA-256 and read as the declared
    type. The bytes are read once, in pieces, hashed as they come, into a temporary file the readers then open."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as copy:
        digest, size = hashlib.sha256(), 0
        while (piece := stored.read(READ_PIECE_BYTES)) and size <= size_bytes:
            size += len(piece)
            digest.update(piece)
            copy.write(piece)
        if size != size_bytes:
            raise Unreadable(
                f"The stored file has {'more than ' if size > size_bytes else ''}{size} bytes, "
                f"not the {size_bytes} declared."
            )
        if digest.hexdigest() != sha256:
            raise Unreadable("The stored file's SHA-256 is not the one declared.")
        copy.seek(0)
        return _read_as(copy, media_type)


def _read_as(data: BinaryIO, media_type: str) -> Findings:
    if media_type in IMAGE_FORMATS:
        return _image(data, IMAGE_FORMATS[media_type])
    if media_type == "application/pdf":
        return _pdf(data)
    if media_type == DOCX:
        return _docx(data)
    if media_type in TEXT_TYPES:
        return _text(data.read(), media_type)
    raise Unreadable("Impo cannot read this kind of file.")


def _image(data: BinaryIO, expected_format: str) -> Findings:
    try:
        with Image.open(data) as image:
            if image.format != expected_format:
                raise Unreadable(f"The file is not a {expected_format} image.")
            # Judged from the header, before a pixel is decoded: a small file may declare a huge canvas.
            width, height = image.size
            if width * height > settings.IMPO_ATTACHMENT_MAX_PIXELS:
                raise Unreadable(f"The image has more than {settings.IMPO_ATTACHMENT_MAX_PIXELS} pixels.")
            image.load()  # decodes every pixel of the first frame: a truncated file fails here
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise Unreadable(f"The file is not a readable {expected_format} image.") from exc
    return Findings(width=width, height=height)


def _pdf(data: BinaryIO) -> Findings:
    try:
        reader = pypdf.PdfReader(data)
        if reader.is_encrypted:
            raise Unreadable("The PDF is encrypted.")
        pages = len(reader.pages)
        collected = _Collected()
        for page in reader.pages[: settings.IMPO_ATTACHMENT_MAX_PAGES]:
            if not collected.add(page.extract_text() or ""):
                break
    except (pypdf.errors.PyPdfError, *_MALFORMED) as exc:
        raise Unreadable("The file is not a readable PDF.") from exc
    return Findings(pages=pages, **collected.findings(cut=pages > settings.IMPO_ATTACHMENT_MAX_PAGES))


def _docx(data: BinaryIO) -> Findings:
    collected = _Collected()
    try:
        for paragraph in docx.Document(data).paragraphs:
            if not collected.add(paragraph.text):
                break
    except (docx.opc.exceptions.PackageNotFoundError, *_MALFORMED) as exc:
        raise Unreadable("The file is not a readable Word document.") from exc
    return Findings(**collected.findings())


def _text(data: bytes, media_type: str) -> Findings:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable("The file is not UTF-8 text.") from exc
    if "\x00" in text:
        raise Unreadable("The file is not text (it holds NUL bytes).")
    if media_type == "application/json":
        try:
            json.loads(text)
        except ValueError as exc:
            raise Unreadable("The file is not JSON.") from exc
    collected = _Collected()
    collected.add(text)
    return Findings(**collected.findings())


class _Collected:
    """A document's text, gathered piece by piece up to IMPO_ATTACHMENT_TEXT_CHARS: reading stops once it is full."""

    def __init__(self):
        self.pieces: list[str] = []
        self.length = 0
        self.cut = False

    def add(self, piece: str) -> bool:
        """Adds a piece (a page, a paragraph); False once the bound is reached and nothing more should be read."""
        room = max(0, settings.IMPO_ATTACHMENT_TEXT_CHARS - self.length)
        if len(piece) > room:
            piece, self.cut = piece[:room], True
        self.pieces.append(piece)
        self.length += len(piece) + 1
        return not self.cut

    def findings(self, *, cut: bool = False) -> dict:
        return {"text": "\n".join(self.pieces), "text_cut": self.cut or cut}
