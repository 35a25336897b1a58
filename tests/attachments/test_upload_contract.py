"""prepare → PUT → complete (docs/api.md "Attachments"), with the answer of each step lost and the step sent again."""

import pytest

from attachments.models import Attachment
from tests.attachments.files import complete, manifest, pdf, png, prepare, put, upload

pytestmark = pytest.mark.django_db


def test_the_limits_list_the_offered_formats(api):
    limits = api.get("/api/v1/attachments").json()

    assert (limits["maxBytes"], limits["maxFiles"]) == (10 * 1024 * 1024, 8)
    assert limits["formats"]["png"] == "image/png"
    assert limits["formats"]["docx"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_an_image_goes_through_prepare_put_and_complete(api):
    data = png(640, 480)
    sent = manifest(data, "photo.png", "image/png")

    prepared = prepare(api, sent).json()
    assert prepared["status"] == "upload"
    assert prepared["upload"]["method"] == "PUT"
    assert prepared["upload"]["headers"] == {"Content-Type": "image/png"}
    assert put(api, prepared["upload"], data).status_code == 204
    done = complete(api, sent["id"])

    assert done.status_code == 200
    assert done.json() == {
        **{key: sent[key] for key in ("id", "name", "mediaType", "sizeBytes", "sha256")},
        "status": "ready",
        "kind": "image",
        "width": 640,
        "height": 480,
    }


def test_the_stored_key_is_random_and_never_the_name(api, user):
    sent = manifest(png(), "holiday-in-rome.png", "image/png")
    prepare(api, sent)

    key = Attachment.objects.get(owner=user).key
    assert "rome" not in key and sent["id"] not in key and len(key) > 40


def test_a_prepare_whose_answer_was_lost_gives_a_new_url_for_the_same_file(api, user):
    data = png()
    sent = manifest(data, "photo.png", "image/png")
    first = prepare(api, sent).json()["upload"]

    again = prepare(api, sent).json()

    assert again["status"] == "upload"
    assert put(api, again["upload"], data).status_code == 204
    assert put(api, first, data).status_code == 204  # the lost URL still stores the same bytes
    assert Attachment.objects.filter(owner=user).count() == 1
    assert complete(api, sent["id"]).json()["status"] == "ready"


def test_a_put_whose_answer_was_lost_is_sent_again_harmlessly(api):
    data = pdf("twice")
    sent = manifest(data, "notes.pdf", "application/pdf")
    upload_url = prepare(api, sent).json()["upload"]
    put(api, upload_url, data)

    assert put(api, upload_url, data).status_code == 204
    assert complete(api, sent["id"]).json()["pages"] == 1


def test_a_prepare_after_complete_answers_ready_with_the_file(api):
    data = png()
    sent = manifest(data, "photo.png", "image/png")
    prepared = prepare(api, sent).json()
    put(api, prepared["upload"], data)
    completed = complete(api, sent["id"]).json()

    again = prepare(api, sent)

    assert again.status_code == 200
    assert again.json() == {"status": "ready", "file": completed}


def test_a_complete_whose_answer_was_lost_answers_the_same_file(api):
    data = png()
    first = upload(api, data, "photo.png", "image/png").json()

    again = complete(api, first["id"])

    assert (again.status_code, again.json()) == (200, first)


def test_the_file_route_gives_the_original_bytes_to_be_saved_never_shown_as_a_page(api):
    data = png()
    done = upload(api, data, "my photo.png", "image/png").json()

    answer = api.get(f"/api/v1/files/upload_{done['id']}")

    assert answer.status_code == 200
    assert b"".join(answer.streaming_content) == data
    assert answer["Content-Type"] == "image/png"
    assert answer["Content-Disposition"] == 'attachment; filename="my photo.png"'
    assert answer["X-Content-Type-Options"] == "nosniff"
    assert answer["Cache-Control"] == "private, no-store"
    assert answer["Content-Security-Policy"] == "sandbox"


def test_a_file_not_yet_complete_is_not_served(api):
    sent = manifest(png(), "photo.png", "image/png")
    prepare(api, sent)

    assert api.get(f"/api/v1/files/upload_{sent['id']}").status_code == 404


def test_a_deleted_file_and_its_bytes_are_gone(api, attachment_store):
    done = upload(api, png(), "photo.png", "image/png").json()

    deleted = api.delete(f"/api/v1/attachments/{done['id']}")

    assert (deleted.status_code, deleted.json()) == (200, {"deleted": True})
    assert api.get(f"/api/v1/files/upload_{done['id']}").status_code == 404
    assert not Attachment.objects.exists()
    assert [path for path in attachment_store.rglob("*") if path.is_file()] == []
