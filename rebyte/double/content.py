"""The parts of a user message the double takes, as the SDK types them (`openai.types.beta.input_content_param`):
`input_text` and `input_image`. An image given as a `data:` URL must decode to an image the double can read (else
400 `invalid_input`, as a provider refuses an image it cannot open); the echo agent acknowledges each image it was
shown as `[image WxH format]`, so tests see what reached the provider."""

from __future__ import annotations

import base64
import binascii
import io
import re
from typing import Any

from PIL import Image, UnidentifiedImageError

from rebyte.double.errors import ApiError

_DATA_URL = re.compile(r"^data:(?P<media_type>[\w.+-]+/[\w.+-]+);base64,(?P<payload>[A-Za-z0-9+/=]*)$")


def message_script(content: list[Any], *, param: str) -> str:
    """What the echo agent reads of one user message: its last text, then a note of each image in it."""
    texts, images = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_text" and isinstance(part.get("text"), str) and set(part) == {"type", "text"}:
            texts.append(part["text"])
        elif kind == "input_image" and isinstance(part.get("image_url"), str) and set(part) == {"type", "image_url"}:
            images.append(_image_note(part["image_url"], param=param))
        else:
            raise ApiError(400, "invalid_input", "content parts are input_text or input_image", param=param)
    return " ".join(filter(None, [texts[-1] if texts else "", *images]))


def user_item_part(part: dict[str, Any]) -> dict[str, Any]:
    """A validated part as the session's user message item shows it (the SDK's MessageContentResource…)."""
    if part["type"] == "input_image":
        return {"type": "input_image", "image_url": part["image_url"]}
    return {"type": "input_text", "text": part["text"]}


def _image_note(url: str, *, param: str) -> str:
    if url.startswith("https://"):
        return "[image]"  # the real service fetches it; the double has no network to look
    match = _DATA_URL.match(url)
    if match is None:
        raise ApiError(400, "invalid_input", "image_url is an https or base64 data: URL", param=param)
    try:
        with Image.open(io.BytesIO(base64.b64decode(match["payload"], validate=True))) as image:
            image.load()
            return f"[image {image.width}x{image.height} {image.format.lower()}]"
    except (binascii.Error, UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ApiError(400, "invalid_input", "image_url's data is not an image", param=param) from exc
