"""What the provider is sent for a file: the SDK's content parts, an image's clean copy, a document's bounded text."""

import base64
import io
import os

from openai.types.beta.input_content_param import InputContentParamInputImage, InputContentParamInputText
from PIL import Image

from attachments.provider_parts import document_part, image_part
from tests.attachments.files import jpeg_with_gps_rotated, png

ROOMY = 10 * 1024 * 1024


def noise(width: int, height: int, mode: str = "RGB", format: str = "JPEG") -> bytes:
    """A photo that compresses as badly as one can: each clean copy of it is as large as its pixels."""
    out = io.BytesIO()
    Image.frombytes(mode, (width, height), os.urandom(width * height * len(mode))).save(out, format=format)
    return out.getvalue()


def _decoded(part) -> Image.Image:
    media, _, payload = part["image_url"].partition(";base64,")
    assert media in ("data:image/png", "data:image/jpeg")
    return Image.open(io.BytesIO(base64.b64decode(payload)))


def test_an_image_part_has_the_sdks_keys_and_a_data_url():
    part = image_part(png(), max_bytes=ROOMY)

    assert set(part) == set(InputContentParamInputImage.__annotations__) == {"type", "image_url"}
    assert part["type"] == "input_image"
    assert _decoded(part).size == (64, 48)


def test_the_clean_copy_has_no_exif_and_stands_upright():
    original = Image.open(io.BytesIO(jpeg_with_gps_rotated(300, 100)))
    assert original.getexif().get_ifd(0x8825)  # the GPS block is there to remove

    clean = _decoded(image_part(jpeg_with_gps_rotated(300, 100), max_bytes=ROOMY))

    assert clean.size == (100, 300)  # orientation 6 applied
    assert not clean.getexif()
    assert "exif" not in clean.info


def test_the_clean_copy_is_at_most_2048_pixels_on_its_longest_side():
    clean = _decoded(image_part(png(4096, 1024), max_bytes=ROOMY))

    assert clean.size == (2048, 512)


def test_a_document_part_is_headed_with_its_name_and_pages():
    part = document_part(name="talk.pdf", pages=2, text="hello", text_cut=False, limit=100)

    assert set(part) == set(InputContentParamInputText.__annotations__) == {"type", "text"}
    assert part == {"type": "input_text", "text": "Attached document: talk.pdf (2 pages)\n\nhello"}


def test_a_document_part_says_when_its_text_is_cut():
    part = document_part(name="long.txt", pages=None, text="0123456789", text_cut=False, limit=4)

    assert part["text"].startswith("Attached document: long.txt\n\n0123\n\n")
    assert "only its first 4 characters" in part["text"]


def test_a_document_cut_at_extraction_says_so_too():
    part = document_part(name="long.pdf", pages=300, text="short", text_cut=True, limit=100)

    assert "cut here" in part["text"]


def test_a_photo_too_large_for_its_share_of_the_input_is_sent_smaller_and_always_the_same():
    photo = noise(2048, 1536)
    assert len(photo) > 1024 * 1024

    part = image_part(photo, max_bytes=160 * 1024)

    assert len(part["image_url"]) <= 160 * 1024
    assert max(_decoded(part).size) < 2048 and _decoded(part).size[0] / _decoded(part).size[1] == 2048 / 1536
    assert image_part(photo, max_bytes=160 * 1024) == part  # a replacement worker sends the same input


def test_a_transparent_png_too_large_as_a_png_goes_as_a_jpeg_on_white():
    part = image_part(noise(1024, 1024, "RGBA", "PNG"), max_bytes=200 * 1024)

    assert part["image_url"].startswith("data:image/jpeg;base64,")
    assert len(part["image_url"]) <= 200 * 1024
