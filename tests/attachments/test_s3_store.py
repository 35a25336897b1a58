"""The S3-compatible store end to end, against moto's standalone S3 server run as a process (never a patched client):
the client PUTs to a presigned URL that signs the SHA-256 header, so no web process carries the bytes.

moto checks neither signatures nor checksums, where S3 refuses a PUT whose bytes or headers differ from what was
signed; complete hashes what was stored all the same, which the last test shows with bytes moto let through."""

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from attachments.models import Attachment
from tests.attachments.files import complete, manifest, pdf, png, prepare
from tests.attachments.s3 import BUCKET

pytestmark = [pytest.mark.django_db, pytest.mark.processes]


def test_a_file_goes_up_to_the_bucket_by_a_presigned_put_and_comes_back(api, s3_store):
    data = png(320, 200)
    sent = manifest(data, "photo.png", "image/png")

    upload = prepare(api, sent).json()["upload"]
    signed = parse_qs(urlsplit(upload["url"]).query)["X-Amz-SignedHeaders"][0].split(";")
    stored = httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=10)
    done = complete(api, sent["id"])

    assert upload["url"].startswith(f"{s3_store.endpoint}/{BUCKET}/uploads/")
    assert "x-amz-checksum-sha256" in signed and "content-type" in signed
    assert stored.status_code == 200
    assert (done.status_code, done.json()["width"]) == (200, 320)
    (key,) = s3_store.keys()
    assert key == Attachment.objects.get(client_id=sent["id"]).key
    assert b"".join(api.get(f"/api/v1/files/upload_{sent['id']}").streaming_content) == data


def test_complete_before_the_put_is_incomplete_and_a_deleted_file_leaves_the_bucket(api, s3_store):
    data = pdf("in the bucket")
    sent = manifest(data, "notes.pdf", "application/pdf")
    upload = prepare(api, sent).json()["upload"]
    assert complete(api, sent["id"]).json()["error"]["code"] == "upload_incomplete"
    httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=10).raise_for_status()
    assert complete(api, sent["id"]).status_code == 200

    assert api.delete(f"/api/v1/attachments/{sent['id']}").status_code == 200

    assert s3_store.keys() == []


def test_other_bytes_a_store_let_through_are_unreadable_at_complete_and_deleted(api, s3_store):
    sent = manifest(png(), "photo.png", "image/png")
    upload = prepare(api, sent).json()["upload"]
    httpx.put(upload["url"], content=png(color=(0, 0, 0)), headers=upload["headers"], timeout=10).raise_for_status()

    answer = complete(api, sent["id"])

    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "attachment_unreadable")
    assert s3_store.keys() == []
