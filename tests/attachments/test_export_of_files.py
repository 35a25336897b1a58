"""`GET /api/v1/export` carries the owner's files (docs/data-lifecycle.md "Export: `GET /api/v1/export`"): each
complete file's metadata, the messages that carry it and its bytes in base64, served by a real web process reading
the store a piece at a time; a file still waiting for its bytes, another user's, and one only a deleted conversation
carries are left out."""

import base64
import io
import os

import httpx
import pytest
from PIL import Image

from accounts.selectors import FILE_PIECE_BYTES
from devtools.stack import start_web
from tests.attachments.files import manifest, pdf, png, prepare, upload
from tests.attachments.lifecycle import carried_by
from tests.client import bearer, post_message, start_task, token_of

pytestmark = pytest.mark.processes


def _noise_png(side: int) -> bytes:
    """A PNG that does not compress (about 3 bytes a pixel)."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def web(stack, attachment_store) -> str:
    return start_web(stack, env={"IMPO_ATTACHMENT_DIR": str(attachment_store)})[1]


def test_the_export_carries_each_file_with_its_bytes(web, api, user, other_api):
    large = _noise_png(400)  # ~480 KB: several pieces of the export's reads
    assert len(large) > 2 * FILE_PIECE_BYTES
    photo = upload(api, large, "photo.png", "image/png").json()
    notes_bytes = pdf("page one", "page two")
    notes = upload(api, notes_bytes, "notes.pdf", "application/pdf").json()
    prepare(api, manifest(png(color=(1, 1, 1)), "pending.png", "image/png"))
    gone_with_task = upload(api, png(color=(3, 3, 3)), "task.png", "image/png").json()["id"]
    upload(other_api, png(color=(7, 7, 7)), "theirs.png", "image/png")
    message = post_message(api, "look")["messageId"]
    carried_by(photo["id"], message)
    task = start_task(api, "about to go")
    carried_by(gone_with_task, task["messageId"])
    assert api.delete(f"/api/v1/tasks/{task['taskId']}").status_code == 202

    response = httpx.get(f"{web}/api/v1/export", headers=bearer(token_of(user)), timeout=60)

    assert response.status_code == 200
    files = response.json()["files"]
    assert [file["id"] for file in files] == [photo["id"], notes["id"]]
    exported_photo, exported_notes = files
    assert base64.b64decode(exported_photo["contentBase64"]) == large
    assert base64.b64decode(exported_notes["contentBase64"]) == notes_bytes
    assert exported_photo["messageIds"] == [message]
    assert exported_notes["messageIds"] == []
    assert exported_photo["fileId"] == f"upload_{photo['id']}"
    assert {key: exported_photo[key] for key in photo} == photo  # what complete said of it
    assert exported_notes["pages"] == 2
