"""Every route is its owner's: another user's id is 404 and changes nothing, and the same id prepared by another user
is a file of their own."""

import pytest

from attachments.models import Attachment
from tests.attachments.files import complete, manifest, png, prepare, put, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def others_file(other_api) -> str:
    return upload(other_api, png(), "theirs.png", "image/png").json()["id"]


def test_another_users_file_is_not_found_on_every_route(api, others_file):
    assert complete(api, others_file).status_code == 404
    assert api.get(f"/api/v1/files/upload_{others_file}").status_code == 404
    assert api.delete(f"/api/v1/attachments/{others_file}").status_code == 404
    assert Attachment.objects.get(client_id=others_file).status == "ready"


def test_another_users_pending_file_cannot_be_completed_or_deleted(api, other_api):
    sent = manifest(png(), "theirs.png", "image/png")
    prepare(other_api, sent)

    assert complete(api, sent["id"]).status_code == 404
    assert api.delete(f"/api/v1/attachments/{sent['id']}").status_code == 404


def test_the_same_id_prepared_by_another_user_is_a_file_of_their_own(api, user, other_api):
    data = png(color=(1, 2, 3))
    sent = manifest(data, "mine.png", "image/png")
    theirs = prepare(other_api, {**sent, "name": "theirs.png"}).json()
    assert theirs["status"] == "upload"

    mine = prepare(api, sent).json()

    assert mine["status"] == "upload"
    assert put(api, mine["upload"], data).status_code == 204
    assert complete(api, sent["id"]).json()["name"] == "mine.png"
    assert Attachment.objects.filter(client_id=sent["id"]).count() == 2


def test_a_request_without_a_token_is_unauthorized(client):
    assert client.get("/api/v1/attachments").status_code == 401
    assert client.post("/api/v1/attachments/prepare", {}, content_type="application/json").status_code == 401
