"""Every refusal of the upload contract, each a clear 4xx in the ICA envelope; bytes that fail complete are deleted."""

import hashlib

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from attachments.models import Attachment
from runtime.models import Message
from tests.attachments.files import EXECUTABLE, complete, encrypted_pdf, manifest, pdf, png, prepare, put
from tests.client import post_message

pytestmark = pytest.mark.django_db

GOOD = png()


def refusal(answer) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


@pytest.mark.parametrize(
    "changes",
    [
        {"sha256": "not-hex"},
        {"sha256": "A" * 64},
        {"sizeBytes": 0},
        {"sizeBytes": 10 * 1024 * 1024 + 1},
        {"sizeBytes": "12"},
        {"name": "../etc/passwd.png"},
        {"name": "   "},
        {"id": "not-a-uuid"},
        {"extra": True},
    ],
)
def test_a_manifest_breaking_its_rules_is_invalid_upload(api, changes):
    answer = prepare(api, manifest(GOOD, "photo.png", "image/png", **changes))

    assert refusal(answer) == (400, "invalid_upload")
    assert answer.json()["error"]["fields"]
    assert not Attachment.objects.exists()


def test_a_manifest_missing_a_field_is_invalid_upload(api):
    sent = manifest(GOOD, "photo.png", "image/png")
    del sent["sha256"]

    assert refusal(prepare(api, sent)) == (400, "invalid_upload")


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("photo.exe", "application/octet-stream"),
        ("photo.png", "image/jpeg"),
        ("photo", "image/png"),
        ("a.doc", "application/msword"),
    ],
)
def test_a_type_not_offered_is_unsupported(api, name, media_type):
    assert refusal(prepare(api, manifest(GOOD, name, media_type))) == (415, "unsupported_file_type")


def test_the_same_id_with_another_manifest_conflicts(api):
    sent = manifest(GOOD, "photo.png", "image/png")
    prepare(api, sent)

    assert refusal(prepare(api, {**sent, "name": "other.png"})) == (409, "attachment_conflict")


def test_a_file_over_the_owners_quota_is_refused(api, settings):
    settings.IMPO_ATTACHMENT_QUOTA_BYTES = len(GOOD) * 2
    prepare(api, manifest(GOOD, "one.png", "image/png"))
    prepare(api, manifest(GOOD, "two.png", "image/png"))

    assert refusal(prepare(api, manifest(GOOD, "three.png", "image/png"))) == (413, "attachment_quota_exceeded")


def test_complete_before_the_bytes_is_upload_incomplete(api):
    sent = manifest(GOOD, "photo.png", "image/png")
    prepare(api, sent)

    answer = complete(api, sent["id"])

    assert refusal(answer) == (409, "upload_incomplete")
    assert answer.json()["error"]["retryable"] is True


def test_a_put_of_other_bytes_stores_nothing(api, attachment_store):
    sent = manifest(GOOD, "photo.png", "image/png")
    upload = prepare(api, sent).json()["upload"]

    assert refusal(put(api, upload, png(color=(0, 0, 0)))) == (400, "invalid_upload")
    assert refusal(put(api, upload, GOOD + b"more")) == (400, "invalid_upload")
    assert refusal(complete(api, sent["id"])) == (409, "upload_incomplete")


def test_a_forged_upload_url_is_not_found(api):
    upload = prepare(api, manifest(GOOD, "photo.png", "image/png")).json()["upload"]
    forged = {**upload, "url": upload["url"][:-3] + "xyz"}

    assert refusal(put(api, forged, GOOD)) == (404, "not_found")


def _bytes_in_the_store(api, data: bytes, name: str, media_type: str, **changes) -> str:
    """Prepares the manifest and puts `data` in the store under its key, as a client's PUT to an S3-compatible store
    that ignores checksums would leave them: complete must judge the bytes by itself."""
    sent = manifest(data, name, media_type, **changes)
    prepare(api, sent)
    storages["attachments"].save(Attachment.objects.get(client_id=sent["id"]).key, ContentFile(data))
    return sent["id"]


@pytest.mark.parametrize(
    ("data", "name", "media_type"),
    [
        (EXECUTABLE, "photo.png", "image/png"),
        (GOOD[: len(GOOD) // 2], "photo.png", "image/png"),
        (encrypted_pdf(), "secret.pdf", "application/pdf"),
        (EXECUTABLE, "report.pdf", "application/pdf"),
        (EXECUTABLE, "letter.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("café".encode("latin-1"), "notes.txt", "text/plain"),
        (b"{not json", "data.json", "application/json"),
    ],
    ids=[
        "executable-as-png",
        "truncated-png",
        "encrypted-pdf",
        "executable-as-pdf",
        "executable-as-docx",
        "latin-1",
        "bad-json",
    ],
)
def test_bytes_that_are_not_their_declared_type_are_unreadable_and_deleted(
    api, attachment_store, data, name, media_type
):
    attachment_id = _bytes_in_the_store(api, data, name, media_type)

    answer = complete(api, attachment_id)

    assert refusal(answer) == (422, "attachment_unreadable")
    assert [path for path in attachment_store.rglob("*") if path.is_file()] == []
    assert refusal(complete(api, attachment_id)) == (409, "upload_incomplete")


def test_an_image_declaring_more_pixels_than_the_bound_is_unreadable(api, settings):
    settings.IMPO_ATTACHMENT_MAX_PIXELS = 1000 * 1000
    attachment_id = _bytes_in_the_store(api, png(1001, 1000), "bomb.png", "image/png")

    assert refusal(complete(api, attachment_id)) == (422, "attachment_unreadable")


def test_bytes_whose_sha256_is_not_the_manifests_are_unreadable(api):
    other = pdf("tampered")
    attachment_id = _bytes_in_the_store(
        api, other, "notes.pdf", "application/pdf", sha256=hashlib.sha256(b"what the client declared").hexdigest()
    )

    assert refusal(complete(api, attachment_id)) == (422, "attachment_unreadable")


def test_a_file_a_message_carries_cannot_be_deleted(api):
    sent = manifest(GOOD, "photo.png", "image/png")
    prepare(api, sent)
    # Admission will write this reference when messages carry attachmentIds; here the test writes it.
    message = Message.objects.get(id=post_message(api, "look at this")["messageId"])
    Attachment.objects.get(client_id=sent["id"]).messages.add(message)

    assert refusal(api.delete(f"/api/v1/attachments/{sent['id']}")) == (409, "attachment_in_use")
    assert Attachment.objects.filter(client_id=sent["id"]).exists()


def test_a_put_without_a_ticket_is_not_found_and_another_method_not_allowed(api):
    sent = manifest(GOOD, "photo.png", "image/png")
    prepare(api, sent)
    path = f"/api/v1/attachments/{sent['id']}/upload"

    assert refusal(api.put(path, GOOD, content_type="image/png")) == (404, "not_found")
    assert refusal(api.generic("TRACE", path)) == (405, "method_not_allowed")
