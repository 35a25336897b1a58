"""The chaos run's uploads (docs/design.md §12), as a client makes them through the web server: prepare → PUT →
complete, each step sent again through an outage with the same body; then the file is sent with the client's next
message, deleted by its owner, or left unsent for the orphan sweep (which the run's short
IMPO_ATTACHMENT_ORPHAN_SECONDS lets act within it)."""

import contextlib
import hashlib
import io
import random
import time
import uuid
from typing import TYPE_CHECKING

import httpx
from PIL import Image

from devtools.records import ChaosUser, UploadedFile
from tests.chaos.clients import CLIENT_RETRY_SECONDS, accepted, request

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

# The store's bounds in the run's stack: an upload URL lives this long, and an unsent file goes this long after it
# was last touched (the orphan time must outlast the URL; impo/attachment_settings.py refuses otherwise). Long enough
# that a file about to be sent outlives the outages its message is retried through, short enough that the unsent
# ones go while the run settles.
UPLOAD_SECONDS, ORPHAN_SECONDS = 20, 30
UPLOAD_ENV = {
    "IMPO_ATTACHMENT_UPLOAD_SECONDS": str(UPLOAD_SECONDS),
    "IMPO_ATTACHMENT_ORPHAN_SECONDS": str(ORPHAN_SECONDS),
}
FATES = ("sent", "sent", "deleted", "unsent")


def _png(rng: random.Random) -> tuple[bytes, tuple[int, int]]:
    out = io.BytesIO()
    size = (rng.randint(4, 40), rng.randint(4, 40))
    Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3))).save(out, format="PNG")
    return out.getvalue(), size


def upload(run: "ChaosRun", http: httpx.Client, user: ChaosUser, rng: random.Random, fate: str) -> UploadedFile:
    """A complete file of the user's, recorded with its intended fate (the caller carries it out)."""
    data, size = _png(rng)
    manifest = {
        "id": str(uuid.uuid4()),
        "name": f"chaos-{rng.randrange(10**6)}.png",
        "mediaType": "image/png",
        "sizeBytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    give_up = time.monotonic() + CLIENT_RETRY_SECONDS
    while True:
        prepared = accepted(http, "POST", "/api/v1/attachments/prepare", manifest, status=200)
        if prepared["status"] == "upload":
            _put(prepared["upload"], data)
        done = request(http, "POST", f"/api/v1/attachments/{manifest['id']}/complete", {})
        if done.status_code == 200:
            break
        # The PUT's URL expired in an outage, or its answer was lost before the bytes were stored: prepare again.
        if done.status_code != 409 or time.monotonic() > give_up:
            raise AssertionError(f"complete of {manifest['id']} answered {done.status_code}: {done.text[:200]}")
    uploaded = UploadedFile(user=user, client_id=manifest["id"], fate=fate, size=size)
    run.uploads.append(uploaded)
    run.figures.commands_by_kind["upload"] += 1
    return uploaded


def _put(upload_answer: dict, data: bytes) -> None:
    """The PUT as a client sends it; an outage's answer (or none) is left to complete's verdict."""
    with contextlib.suppress(httpx.TransportError):
        httpx.put(upload_answer["url"], content=data, headers=upload_answer["headers"], timeout=20)


def delete(run: "ChaosRun", http: httpx.Client, uploaded: UploadedFile) -> None:
    """The owner deletes the file (404: an earlier attempt whose answer was lost did)."""
    response = request(http, "DELETE", f"/api/v1/attachments/{uploaded.client_id}")
    if response.status_code not in (200, 404):
        raise AssertionError(f"DELETE of file {uploaded.client_id} answered {response.status_code}")
    run.figures.commands_by_kind["upload_delete"] += 1
