"""What the provider is sent for a file (docs/design.md §12, docs/provider.md "Attachments"), as the SDK types a user
message's content (`openai.types.beta.input_content_param`): pure functions of what is stored, so a worker that
replaces a dead one builds the same input.

An image goes as an `input_image` whose `image_url` is a `data:` URL of a clean copy — its orientation applied, its
longest side at most IMAGE_MAX_SIDE, and nothing of the original but its pixels (no EXIF, GPS, comments or
profiles) — so the provider never needs to reach Impo. A document goes as `input_text`, headed with its name.
`input_part` is what a file a message carries is sent as: an image's bytes read from the store when it is called
(at send time), a document's text as complete kept it.
"""

import base64
import io

from django.conf import settings
from openai.types.beta.input_content_param import (
    InputContentParam,
    InputContentParamInputImage,
    InputContentParamInputText,
)
from PIL import Image, ImageOps

from attachments.models import Attachment, AttachmentKind
from attachments.storage import store

IMAGE_MAX_SIDE = 2048
# The sides and JPEG qualities tried in turn until a clean copy fits its share of the input: a photo of noise at
# 2048 px is megabytes, more than a provider takes in one request.
_SMALLER_SIDES = (2048, 1600, 1280, 1024, 800, 640, 512, 384, 256, 128)
_JPEG_QUALITIES = (85, 70, 55)
_DATA_URL_OVERHEAD = len("data:image/jpeg;base64,")


def image_part(data: bytes, *, max_bytes: int) -> InputContentParamInputImage:
    """The clean copy of a checked image's bytes (its first frame) as a `data:` URL of at most `max_bytes`: a PNG
    when it was one and fits, else a JPEG, each at the largest side (≤ IMAGE_MAX_SIDE) and quality that fit; the
    smallest tried when none does. The same bytes always give the same part."""
    with Image.open(io.BytesIO(data)) as original:
        upright = ImageOps.exif_transpose(original)
        upright.load()
        was_png = original.format != "JPEG"
    encoded, media_type = b"", ""
    for side in _SMALLER_SIDES:
        clean = _pixels_only(upright, side)
        for media_type, encoded in _encodings(clean, was_png):
            if _data_url_length(encoded) <= max_bytes:
                return _part(media_type, encoded)
    return _part(media_type, encoded)


def _pixels_only(image: Image.Image, side: int) -> Image.Image:
    """A copy at most `side` on its longest side, rebuilt from its pixels alone: no metadata can follow them."""
    scaled = image.copy()
    scaled.thumbnail((side, side))
    mode = "RGBA" if "A" in scaled.getbands() or scaled.mode == "P" else "RGB"
    pixels = scaled.convert(mode)
    return Image.frombytes(mode, pixels.size, pixels.tobytes())


def _encodings(clean: Image.Image, was_png: bool):
    if was_png:
        encoded = io.BytesIO()
        clean.save(encoded, format="PNG", optimize=True)
        yield "image/png", encoded.getvalue()
    # A JPEG has no alpha: transparent pixels go on white, as a viewer shows them.
    opaque = clean
    if clean.mode == "RGBA":
        opaque = Image.new("RGB", clean.size, (255, 255, 255))
        opaque.paste(clean, mask=clean.getchannel("A"))
    for quality in _JPEG_QUALITIES:
        encoded = io.BytesIO()
        opaque.save(encoded, format="JPEG", quality=quality)
        yield "image/jpeg", encoded.getvalue()


def _data_url_length(encoded: bytes) -> int:
    return _DATA_URL_OVERHEAD + 4 * ((len(encoded) + 2) // 3)


def _part(media_type: str, encoded: bytes) -> InputContentParamInputImage:
    return {"type": "input_image", "image_url": f"data:{media_type};base64,{base64.b64encode(encoded).decode()}"}


def document_part(*, name: str, pages: int | None, text: str, text_cut: bool, limit: int) -> InputContentParamInputText:
    """A document's text under a heading with its name (and pages), at most `limit` characters of it, saying when the
    text sent is not all the document holds."""
    heading = f"Attached document: {name}" + (f" ({pages} pages)" if pages else "")
    body = text[:limit]
    cut = text_cut or len(text) > limit
    ending = f"\n\n[The document is cut here: only its first {len(body)} characters are included.]" if cut else ""
    return {"type": "input_text", "text": f"{heading}\n\n{body}{ending}"}


def input_part(attachment: Attachment, *, files_in_message: int) -> InputContentParam:
    """The part a ready file is sent as, built from what is stored: an image from its stored bytes, read now, a
    document from the text extracted at complete. A message's files share IMPO_ATTACHMENT_INPUT_BYTES of the input
    equally, so the request stays within what a provider takes whatever they are."""
    share = settings.IMPO_ATTACHMENT_INPUT_BYTES // max(1, files_in_message)
    if attachment.kind == AttachmentKind.IMAGE:
        with store().open(attachment.key, "rb") as stored:
            return image_part(stored.read(), max_bytes=share)
    return document_part(
        name=attachment.name,
        pages=attachment.pages,
        text=attachment.text,
        text_cut=attachment.text_cut,
        # A character may take up to six bytes in the request's JSON (a \uXXXX escape).
        limit=min(settings.IMPO_ATTACHMENT_TEXT_CHARS, share // 6),
    )
