"""Messages carry files (docs/api.md "Messages with files"): `attachmentIds` checked and linked by the admission, in
its transaction; history's `parts` and the reply stream's `data-instant-file` chunks show them."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attachments.models import Attachment
from runtime import selectors
from runtime.models import Message, Submission
from runtime.realtime.ai_sdk_stream import UIMessageStream
from tests.attachments.files import manifest, pdf, png, prepare, upload
from tests.client import history, post, post_message, send_message, start_task

pytestmark = pytest.mark.django_db


def uploaded(api, data=None, name="photo.png", media_type="image/png") -> dict:
    done = upload(api, data or png(), name, media_type)
    assert done.status_code == 200, done.json()
    return done.json()


def part_of(file: dict) -> dict:
    return {
        "type": "data-instant-file",
        "id": f"upload_{file['id']}",
        "data": {
            "schemaVersion": 1,
            "fileId": f"upload_{file['id']}",
            "name": file["name"],
            "mediaType": file["mediaType"],
            "sizeBytes": file["sizeBytes"],
        },
    }


def refusal(response) -> str:
    return response.json()["error"]["code"]


def test_a_message_carries_its_files_in_the_order_sent_and_history_shows_them_as_parts(api):
    photo = uploaded(api)
    notes = uploaded(api, pdf("the notes"), "notes.pdf", "application/pdf")

    receipt = post_message(api, "look at these", attachmentIds=[notes["id"], photo["id"]])

    message = Message.objects.get(id=receipt["messageId"])
    assert {str(attachment.client_id) for attachment in message.attachments.all()} == {photo["id"], notes["id"]}
    user_message, reply = history(api)["messages"]
    assert user_message["parts"] == [part_of(notes), part_of(photo)]
    assert "parts" not in reply


def test_a_message_without_files_has_no_parts_in_history(api):
    post_message(api, "just words")

    assert all("parts" not in message for message in history(api)["messages"])


def test_the_text_may_be_blank_when_files_are_attached(api):
    photo = uploaded(api)

    receipt = post_message(api, "", attachmentIds=[photo["id"]])

    assert Message.objects.get(id=receipt["messageId"]).text == ""


def test_the_text_may_be_left_out_when_files_are_attached(api):
    photo = uploaded(api)

    response = post(api, "/api/v1/conversation/messages", {"clientMessageId": "m-1", "attachmentIds": [photo["id"]]})

    assert response.status_code == 202, response.json()


@pytest.mark.parametrize("files", [{}, {"attachmentIds": []}])
@pytest.mark.parametrize("text", ["", "  \n"])
def test_blank_text_without_files_is_still_an_invalid_request(api, text, files):
    response = send_message(api, text, **files)

    assert response.status_code == 400
    assert refusal(response) == "invalid_request"
    assert "text" in response.json()["error"]["fields"]
    assert not Submission.objects.exists()


@pytest.mark.parametrize(
    "attachment_ids",
    [
        "not-a-list",
        ["not-a-uuid"],
        [42],
        [None],
        None,
        [str(uuid.uuid4()) for _ in range(9)],
    ],
)
def test_an_ill_formed_list_is_refused_as_invalid_attachments(api, attachment_ids):
    response = send_message(api, "hi", attachmentIds=attachment_ids)

    assert response.status_code == 400
    assert refusal(response) == "invalid_attachments"
    assert all(field.startswith("attachmentIds") for field in response.json()["error"]["fields"])
    assert not Submission.objects.exists()


def test_the_same_file_twice_is_refused_as_invalid_attachments(api):
    photo = uploaded(api)

    response = send_message(api, "hi", attachmentIds=[photo["id"], photo["id"]])

    assert (response.status_code, refusal(response)) == (400, "invalid_attachments")


def test_an_unknown_file_is_refused_as_invalid_attachments(api):
    photo = uploaded(api)

    response = send_message(api, "hi", attachmentIds=[photo["id"], str(uuid.uuid4())])

    assert (response.status_code, refusal(response)) == (400, "invalid_attachments")
    assert not Submission.objects.exists()
    assert not Attachment.messages.through.objects.exists()


def test_another_users_file_is_refused_like_an_unknown_one(api, other_api):
    theirs = uploaded(other_api)

    response = send_message(api, "hi", attachmentIds=[theirs["id"]])
    unknown = send_message(api, "hi", client_message_id="m-2", attachmentIds=[str(uuid.uuid4())])

    assert (response.status_code, refusal(response)) == (400, "invalid_attachments")
    assert response.json()["error"]["message"] == unknown.json()["error"]["message"]
    assert not Attachment.messages.through.objects.exists()


def test_a_file_not_yet_completed_is_upload_incomplete(api):
    sent = manifest(png(), "photo.png", "image/png")
    prepare(api, sent)

    response = send_message(api, "hi", attachmentIds=[sent["id"]])

    assert (response.status_code, refusal(response)) == (409, "upload_incomplete")
    assert response.json()["error"]["retryable"] is True
    assert not Submission.objects.exists()


def test_a_replay_with_the_same_files_returns_the_receipt_and_links_them_once(api):
    photo = uploaded(api)

    first = send_message(api, "", attachmentIds=[photo["id"]])
    again = send_message(api, "", attachmentIds=[photo["id"]])

    assert again.status_code == 202
    assert again.json() == first.json()
    assert Attachment.messages.through.objects.count() == 1
    assert Submission.objects.count() == 1


def test_the_same_client_message_id_with_other_files_is_an_idempotency_conflict(api):
    photo, other = uploaded(api), uploaded(api, png(color=(0, 0, 0)))
    send_message(api, "see", attachmentIds=[photo["id"]])

    response = send_message(api, "see", attachmentIds=[other["id"]])

    assert (response.status_code, refusal(response)) == (409, "idempotency_conflict")


def test_a_task_message_carries_files_too(api):
    task = start_task(api, "a task")
    photo = uploaded(api)

    receipt = post_message(api, "", task_id=task["taskId"], client_message_id="m-2", attachmentIds=[photo["id"]])

    assert Message.objects.get(id=receipt["messageId"]).attachments.get().client_id == uuid.UUID(photo["id"])
    assert history(api, task["taskId"])["messages"][2]["parts"] == [part_of(photo)]


def test_a_task_started_with_files_alone_is_titled_by_its_first_file(api):
    photo = uploaded(api, name="garden plan.png")

    task = start_task(api, "", attachmentIds=[photo["id"]])

    assert history(api, task["taskId"])["title"] == "garden plan.png"


def test_a_file_a_message_carries_cannot_be_deleted(api):
    photo = uploaded(api)
    post_message(api, "", attachmentIds=[photo["id"]])

    response = api.delete(f"/api/v1/attachments/{photo['id']}")

    assert (response.status_code, refusal(response)) == (409, "attachment_in_use")
    assert Attachment.objects.filter(client_id=photo["id"]).exists()


def test_the_reply_stream_opens_with_the_files_parts(api):
    photo = uploaded(api)
    receipt = post_message(api, "", attachmentIds=[photo["id"]])
    submission = Submission.objects.get(id=receipt["submissionId"])

    stream = UIMessageStream(message_id=str(submission.assistant_message_id), submission_id=str(submission.id))
    chunks = [chunk for event in selectors.current_attempt_events(submission.id) for chunk in stream.feed(event)]

    assert chunks[0] == part_of(photo)
    assert chunks[1]["type"] == "data-instant-submission"


def test_history_reads_every_messages_files_in_one_query(api):
    def queries_of_a_history_read() -> int:
        with CaptureQueriesContext(connection) as captured:
            history(api)
        return len(captured)

    post_message(api, "", attachmentIds=[uploaded(api)["id"]])
    one = queries_of_a_history_read()
    for index in range(3):
        photo = uploaded(api, png(color=(index, 9, 9)))
        notes = uploaded(api, pdf(f"page {index}"), "notes.pdf", "application/pdf")
        files = [photo["id"], notes["id"]]
        post_message(api, "", client_message_id=f"m-{index + 2}", attachmentIds=files)

    assert queries_of_a_history_read() == one
