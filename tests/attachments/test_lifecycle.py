"""Files go with what carries them (docs/data-lifecycle.md "Files"): a deleted Task's, a cleared Main Chat's, a
deleted account's; a file another conversation still carries stays until that one goes; another user's are never
touched. The sweeper's real pass drives each deletion, in this process, against the local store."""

import pytest
from django.contrib.auth import get_user_model

from attachments.models import Attachment, AttachmentStatus
from runtime.models import Conversation
from tests.attachments.files import manifest, pdf, png, prepare, upload
from tests.attachments.lifecycle import carried_by, files_of, sweep_until
from tests.client import post_message, start_task
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def _stored(store) -> int:
    return sum(path.is_file() for path in store.rglob("*"))


def test_a_deleted_task_takes_the_files_only_it_carries(api, user, other_api, other_user, attachment_store):
    only_in_task = upload(api, png(), "a.png", "image/png").json()["id"]
    also_in_main = upload(api, pdf("both"), "b.pdf", "application/pdf").json()["id"]
    unsent = upload(api, png(color=(1, 2, 3)), "c.png", "image/png").json()["id"]
    theirs = upload(other_api, png(color=(9, 9, 9)), "d.png", "image/png").json()["id"]
    task = start_task(api, "look")
    main = post_message(api, "and here")
    carried_by(only_in_task, task["messageId"])
    carried_by(also_in_main, task["messageId"], main["messageId"])
    carried_by(theirs, post_message(other_api, "mine")["messageId"])

    assert api.delete(f"/api/v1/tasks/{task['taskId']}").status_code == 202
    sweep_until(lambda: only_in_task not in files_of(user), what="the task's file to go")

    assert Conversation.objects.get(task__id=task["taskId"]).purged_at is not None
    assert files_of(user) == {also_in_main, unsent}
    assert files_of(other_user) == {theirs}
    assert _stored(attachment_store) == 3
    assert api.get(f"/api/v1/files/upload_{only_in_task}").status_code == 404

    assert api.delete("/api/v1/conversation").status_code == 202  # Main Chat cleared: its last carrier goes
    sweep_until(lambda: files_of(user) == {unsent}, what="Main Chat's file to go")
    assert _stored(attachment_store) == 2


def test_a_deleted_account_takes_every_file_of_its_owner_and_none_of_another(
    api, user, other_api, other_user, attachment_store
):
    sent = upload(api, png(), "a.png", "image/png").json()["id"]
    upload(api, pdf("never sent"), "b.pdf", "application/pdf")
    prepare(api, manifest(png(color=(5, 5, 5)), "c.png", "image/png"))  # never completed
    theirs = upload(other_api, png(color=(9, 9, 9)), "d.png", "image/png").json()["id"]
    carried_by(sent, start_task(api, "look")["messageId"])

    assert api.delete("/api/v1/account", {"password": PASSWORD}, format="json").status_code == 202
    sweep_until(lambda: not get_user_model().objects.filter(pk=user.pk).exists(), what="the account to go")

    assert not Attachment.objects.filter(owner_id=user.pk).exists()
    assert files_of(other_user) == {theirs}
    assert _stored(attachment_store) == 1
    assert Attachment.objects.get(client_id=theirs).status == AttachmentStatus.READY
