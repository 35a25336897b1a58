"""Files never completed, or completed and never sent, are deleted after IMPO_ATTACHMENT_ORPHAN_SECONDS; a deletion
a crash interrupted is finished."""

from datetime import timedelta

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from attachments import services
from attachments.models import Attachment, AttachmentStatus
from impo.attachment_settings import attachment_settings
from runtime.models import Message
from tests.attachments.files import manifest, png, prepare, upload
from tests.client import post_message

pytestmark = pytest.mark.django_db


def _age(client_id, seconds: float) -> None:
    Attachment.objects.filter(client_id=client_id).update(touched_at=timezone.now() - timedelta(seconds=seconds))


def _stored_files(store) -> list:
    return [path for path in store.rglob("*") if path.is_file()]


def test_old_unsent_files_go_with_their_bytes_and_recent_or_sent_ones_stay(api, settings, attachment_store):
    settings.IMPO_ATTACHMENT_ORPHAN_SECONDS = 7200
    never_completed = manifest(png(), "a.png", "image/png")
    prepare(api, never_completed)
    never_sent = upload(api, png(color=(1, 1, 1)), "b.png", "image/png").json()["id"]
    sent = upload(api, png(color=(2, 2, 2)), "c.png", "image/png").json()["id"]
    recent = upload(api, png(color=(3, 3, 3)), "d.png", "image/png").json()["id"]
    message = Message.objects.get(id=post_message(api, "look")["messageId"])
    Attachment.objects.get(client_id=sent).messages.add(message)
    for old in (never_completed["id"], never_sent, sent):
        _age(old, 7201)

    assert services.sweep_orphans() == 2

    assert sorted(str(kept) for kept in Attachment.objects.values_list("client_id", flat=True)) == sorted(
        [sent, recent]
    )
    assert len(_stored_files(attachment_store)) == 2


def test_a_deletion_decided_before_a_crash_is_finished(api, attachment_store):
    done = upload(api, png(), "a.png", "image/png").json()["id"]
    Attachment.objects.filter(client_id=done).update(status=AttachmentStatus.DELETING)

    assert services.sweep_orphans() == 1

    assert not Attachment.objects.exists()
    assert _stored_files(attachment_store) == []


def test_the_orphan_time_must_outlast_an_upload_url(monkeypatch, tmp_path):
    monkeypatch.setenv("IMPO_ATTACHMENT_UPLOAD_SECONDS", "3600")
    monkeypatch.setenv("IMPO_ATTACHMENT_ORPHAN_SECONDS", "60")

    with pytest.raises(ImproperlyConfigured):
        attachment_settings(environ.Env(), tmp_path)
