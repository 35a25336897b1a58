"""A storage outage delays a deletion, never forgets it (docs/data-lifecycle.md "Files"): with moto's S3 server (a
process) stopped, a Task is deleted and an account too; their rows stay decided while the sweeper's passes fail
against the store, and once the store is back on its port, holding its objects, the objects go and the deletions
finish. Another user's object is never touched, and no file's name or key reaches a log."""

import logging
import time

import httpx
import pytest
from django.contrib.auth import get_user_model

from attachments.models import Attachment, AttachmentStatus
from runtime.models import Conversation
from tests.attachments.files import complete, manifest, pdf, png, prepare
from tests.attachments.lifecycle import carried_by, sweep_until
from tests.client import post_message, start_task
from tests.factories import PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.processes]

# How long the store stays down while the deletion is driven: the 20 s.
STORE_OUTAGE_SECONDS = 20


def _s3_upload(api, data: bytes, name: str, media_type: str) -> str:
    sent = manifest(data, name, media_type)
    upload = prepare(api, sent).json()["upload"]
    httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=10).raise_for_status()
    assert complete(api, sent["id"]).status_code == 200
    return sent["id"]


def _key_of(client_id) -> str:
    return Attachment.objects.get(client_id=client_id).key


def _exists(user) -> bool:
    return get_user_model().objects.filter(pk=user.pk).exists()


def _passes_while_down(seconds: float, still_decided) -> int:
    """The sweeper's passes for `seconds` against the stopped store; each leaves the file decided, never lost."""
    passes, until = 0, time.monotonic() + seconds
    while time.monotonic() < until:
        sweep_until(lambda: True, what="a pass")
        assert still_decided()
        passes += 1
    return passes


def test_a_task_deleted_while_the_store_is_down_loses_its_file_once_it_is_back(api, other_api, s3_store, caplog):
    caplog.set_level(logging.INFO)
    mine = _s3_upload(api, png(), "holiday-photo.png", "image/png")
    theirs = _s3_upload(other_api, pdf("theirs"), "their-notes.pdf", "application/pdf")
    task = start_task(api, "look")
    carried_by(mine, task["messageId"])
    carried_by(theirs, post_message(other_api, "mine")["messageId"])
    mine_key, theirs_key = _key_of(mine), _key_of(theirs)
    s3_store.stop()

    assert api.delete(f"/api/v1/tasks/{task['taskId']}").status_code == 202
    passes = _passes_while_down(
        STORE_OUTAGE_SECONDS,
        lambda: Attachment.objects.filter(client_id=mine, status=AttachmentStatus.DELETING).exists(),
    )
    assert passes >= 2
    assert Conversation.objects.get(task__id=task["taskId"]).purged_at is not None

    s3_store.start()
    assert s3_store.keys() == sorted([mine_key, theirs_key])  # the store kept the object through its outage
    sweep_until(lambda: not Attachment.objects.filter(client_id=mine).exists(), what="the file to go")

    assert s3_store.keys() == [theirs_key]
    assert Attachment.objects.get(client_id=theirs).status == AttachmentStatus.READY
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "the attachment store failed" in logged
    for secret in (mine_key, theirs_key, "holiday-photo", "their-notes"):
        assert secret not in logged


def test_an_account_deleted_while_the_store_is_down_waits_for_its_files(api, user, other_api, s3_store):
    sent = _s3_upload(api, png(), "a.png", "image/png")
    unsent = _s3_upload(api, pdf("kept back"), "b.pdf", "application/pdf")
    theirs = _s3_upload(other_api, png(color=(9, 9, 9)), "c.png", "image/png")
    carried_by(sent, start_task(api, "look")["messageId"])
    theirs_key = _key_of(theirs)
    s3_store.stop()

    assert api.delete("/api/v1/account", {"password": PASSWORD}, format="json").status_code == 202
    _passes_while_down(3, lambda: _exists(user))
    assert set(Attachment.objects.filter(owner=user).values_list("status", flat=True)) == {AttachmentStatus.DELETING}
    assert {str(i) for i in Attachment.objects.filter(owner=user).values_list("client_id", flat=True)} == {sent, unsent}

    s3_store.start()
    sweep_until(lambda: not _exists(user), what="the account to go")

    assert s3_store.keys() == [theirs_key]
