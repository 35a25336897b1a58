"""The local store's PUT through a real web process (gunicorn and uvicorn, as `make run` serves): the edge lets an
upload URL's body be as large as its manifest, no larger, and the bytes reach the store only when they are right."""

import io
import os

import httpx
import pytest
from PIL import Image

from devtools.stack import start_web
from tests.attachments.files import manifest
from tests.client import token_of, web_client

PIECE = 64 * 1024


def _noise_png(side: int) -> bytes:
    """A PNG that does not compress: about 3 bytes a pixel, so `side` 600 is about a MiB."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def web(stack, user, attachment_store):
    _, base_url = start_web(stack, env={"IMPO_ATTACHMENT_DIR": str(attachment_store)})
    with web_client(base_url, token_of(user)) as client:
        yield client


def _pieces(data: bytes):
    """The body as a phone sends it over a slow link: piece by piece, with no length known up front (chunked)."""
    for start in range(0, len(data), PIECE):
        yield data[start : start + PIECE]


def test_a_file_larger_than_a_json_body_goes_up_in_pieces_and_comes_back_whole(web):
    data = _noise_png(600)
    assert len(data) > 16 * PIECE
    sent = manifest(data, "noise.png", "image/png")

    upload = web.post("/api/v1/attachments/prepare", json=sent).json()["upload"]
    stored = httpx.put(upload["url"], content=_pieces(data), headers=upload["headers"], timeout=30)
    assert stored.status_code == 204, stored.text
    # Each answer lost in turn: the same steps again change nothing.
    again = web.post("/api/v1/attachments/prepare", json=sent).json()["upload"]
    assert httpx.put(again["url"], content=data, headers=again["headers"], timeout=30).status_code == 204
    done = web.post(f"/api/v1/attachments/{sent['id']}/complete", json={})
    assert web.post(f"/api/v1/attachments/{sent['id']}/complete", json={}).json() == done.json()

    assert (done.status_code, done.json()["width"]) == (200, 600)
    assert web.post("/api/v1/attachments/prepare", json=sent).json() == {"status": "ready", "file": done.json()}
    assert web.get(f"/api/v1/files/upload_{sent['id']}").content == data


def test_a_body_longer_than_the_manifest_is_refused_at_the_edge(web, attachment_store):
    data = _noise_png(100)
    sent = manifest(data, "noise.png", "image/png")
    upload = web.post("/api/v1/attachments/prepare", json=sent).json()["upload"]

    declared = httpx.put(upload["url"], content=data + b"x", headers=upload["headers"], timeout=30)
    chunked = httpx.put(upload["url"], content=_pieces(data + bytes(PIECE)), headers=upload["headers"], timeout=30)

    assert (declared.status_code, declared.json()["error"]["code"]) == (413, "request_too_large")
    assert (chunked.status_code, chunked.json()["error"]["code"]) == (413, "request_too_large")
    assert [path for path in attachment_store.rglob("*") if path.is_file()] == []


def test_a_large_body_without_a_valid_upload_url_is_refused_as_any_other(web):
    data = _noise_png(200)
    sent = manifest(data, "noise.png", "image/png")
    upload = web.post("/api/v1/attachments/prepare", json=sent).json()["upload"]
    forged = upload["url"][:-4] + "abcd"

    refused = httpx.put(forged, content=data, headers=upload["headers"], timeout=30)

    assert (refused.status_code, refused.json()["error"]["code"]) == (413, "request_too_large")
