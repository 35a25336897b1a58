"""A file's delete and a message carrying it, at once (docs/locking.md, FOR SHARE): one of them wins, never both. The
interleaving is forced by holding, from a connection of the test's own, the row or table the loser must wait for."""

import threading

import psycopg
import pytest

from attachments.models import Attachment
from devtools.stack import wait_until
from runtime.models import Conversation, Submission
from tests.attachments.files import png, upload
from tests.client import post_message, send_message
from tests.concurrency import database_parameters, waiting_for_a_lock
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db(transaction=True)


class InThread:
    """An API request made in a thread of its own, while the test holds what it waits for."""

    def __init__(self, act):
        self.response = None
        self._thread = threading.Thread(target=self._run, args=(act,))
        self._thread.start()

    def _run(self, act) -> None:
        from django.db import connection

        try:
            self.response = act()
        finally:
            connection.close()

    def result(self):
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the request never ended"
        return self.response


LINK_INSERT = '%INSERT INTO "attachments_attachment_messages"%'
DELETE_LOCK = '%FROM "attachments_attachment" %FOR NO KEY UPDATE%'
ADMISSION = "%runtime_conversation%"


def ready_file(user) -> str:
    done = upload(bearer_client(user), png(), "photo.png", "image/png")
    assert done.status_code == 200
    return done.json()["id"]


def test_a_delete_that_waits_for_a_message_linking_the_file_is_refused(user):
    file_id = ready_file(user)
    with psycopg.connect(**database_parameters(), autocommit=False) as holder:
        # The message links its file last: it holds the file (FOR SHARE) while its link waits on this table.
        holder.execute("LOCK TABLE attachments_attachment_messages IN SHARE MODE")
        sending = InThread(lambda: send_message(bearer_client(user), "", attachmentIds=[file_id]))
        wait_until(
            lambda: waiting_for_a_lock(LINK_INSERT),
            timeout=30,
            what="the message's link to wait",
        )
        deleting = InThread(lambda: bearer_client(user).delete(f"/api/v1/attachments/{file_id}"))
        wait_until(
            lambda: waiting_for_a_lock(DELETE_LOCK),
            timeout=30,
            what="the delete to wait for the message's lock on the file",
        )
        holder.rollback()

    assert sending.result().status_code == 202
    deleted = deleting.result()
    assert (deleted.status_code, deleted.json()["error"]["code"]) == (409, "attachment_in_use")
    assert Attachment.objects.get(client_id=file_id).messages.count() == 1


def test_a_message_whose_file_was_deleted_while_it_waited_is_refused(user):
    post_message(bearer_client(user), "the chat exists", client_message_id="m-0")
    conversation = Conversation.objects.get(owner=user)
    file_id = ready_file(user)
    with psycopg.connect(**database_parameters(), autocommit=False) as holder:
        # The message reads its file, then waits for its conversation: the file is deleted meanwhile.
        holder.execute("SELECT 1 FROM runtime_conversation WHERE id = %s FOR NO KEY UPDATE", [conversation.id])
        sending = InThread(lambda: send_message(bearer_client(user), "", attachmentIds=[file_id]))
        wait_until(
            lambda: waiting_for_a_lock(ADMISSION),
            timeout=30,
            what="the message to wait for its conversation",
        )
        deleted = bearer_client(user).delete(f"/api/v1/attachments/{file_id}")
        holder.rollback()

    assert deleted.status_code == 200
    refused = sending.result()
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_attachments")
    assert Submission.objects.count() == 1
    assert not Attachment.objects.filter(client_id=file_id).exists()
