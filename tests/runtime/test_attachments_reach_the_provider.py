"""The files a message carries reach the provider (docs/design.md §12, docs/provider.md "Attachments"): an image as an
`input_image` of its clean copy, a document as its text, read from what is stored when the input is sent. Real
workers, the double over HTTP; the files go to the store the workers read (the local default)."""

import base64
import io
import os
from collections import Counter

import psycopg
from PIL import Image

from devtools.stack import wait_until
from runtime.models import Message, MessageRole, RunState
from tests.attachments.files import jpeg_with_gps_rotated, pdf, upload, word
from tests.client import finished_run, post_message, token_of
from tests.concurrency import database_parameters, waiting_for_a_lock
from tests.realtime.test_submission_stream import assert_well_formed, read_stream

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def uploaded(api, data: bytes, name: str, media_type: str) -> str:
    done = upload(api, data, name, media_type)
    assert done.status_code == 200, done.json()
    return done.json()["id"]


def sent_input(request: dict) -> list[dict]:
    """The user message's content parts a create or an input event carried."""
    body = request["body"]
    (message,) = body["input"] if "input" in body else body["events"][0]["input"]
    return message["content"]


def decoded(data_url: str) -> Image.Image:
    header, _, payload = data_url.partition(",")
    assert header == "data:image/jpeg;base64"
    image = Image.open(io.BytesIO(base64.b64decode(payload)))
    image.load()
    return image


def test_an_image_reaches_the_provider_upright_and_without_its_metadata(workers, api, rebyte_double):
    photo = uploaded(api, jpeg_with_gps_rotated(300, 100), "holiday.jpg", "image/jpeg")

    receipt = post_message(api, "where was this?", attachmentIds=[photo])

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    (create,) = [request for request in rebyte_double.requests() if request["op"] == "create_session"]
    text, image_part = sent_input(create)
    assert text == {"type": "input_text", "text": "where was this?"}
    assert image_part["type"] == "input_image"
    image = decoded(image_part["image_url"])
    assert image.size == (100, 300)  # the EXIF orientation (rotate 90°) applied, then dropped with the rest
    assert dict(image.getexif()) == {}
    assert "exif" not in image.info and "PhoneMaker" not in image_part["image_url"]
    assert run.submission.assistant_message.text == "Echo: where was this? [image 100x300 jpeg]"


def test_the_reply_stream_served_by_the_web_server_opens_with_the_files_part(shared_web, api, user, rebyte_double):
    photo = uploaded(api, jpeg_with_gps_rotated(300, 100), "holiday.jpg", "image/jpeg")
    receipt = post_message(api, "", attachmentIds=[photo])
    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED

    _, items = read_stream(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))

    assert_well_formed(items)
    assert items[1]["type"] == "data-instant-file"
    assert items[1]["data"]["fileId"] == f"upload_{photo}"
    assert [item for item in items[2:] if item != "[DONE]" and item["type"] == "data-instant-file"] == []


def test_a_pdfs_and_a_word_documents_text_reach_the_provider_with_a_later_message(workers, api, rebyte_double):
    first = post_message(api, "hello")
    assert finished_run(first["submissionId"]).state == RunState.COMPLETED
    notes = uploaded(api, pdf("The harvest starts on Monday"), "notes.pdf", "application/pdf")
    letter = uploaded(api, word("Dear Ada,", "the seeds arrived."), "letter.docx", DOCX)

    receipt = post_message(api, "", client_message_id="m-2", attachmentIds=[notes, letter])

    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    (event,) = [request for request in rebyte_double.requests() if request["op"] == "input_message"]
    context, pdf_part, word_part = sent_input(event)
    assert context["type"] == "input_text"  # the message's own date line; its text was blank, so no part of its own
    assert pdf_part == {
        "type": "input_text",
        "text": "Attached document: notes.pdf (1 pages)\n\nThe harvest starts on Monday",
    }
    assert word_part == {
        "type": "input_text",
        "text": "Attached document: letter.docx\n\nDear Ada,\nthe seeds arrived.",
    }


def test_a_worker_killed_after_sending_an_image_leaves_one_turn_with_that_input(stack, api, rebyte_double):
    # The worker sends the create with the image, the session exists upstream, and it is SIGKILLed waiting to adopt
    # it (the table the adoption writes is held); its successor finds the session instead of sending again.
    doomed = stack.start_worker("doomed")
    stack.start_sweeper()
    rebyte_double.configure(delta_delay_ms=200, delta_chunks=8, listing_lag_ms=700)
    photo = uploaded(api, jpeg_with_gps_rotated(300, 100), "holiday.jpg", "image/jpeg")
    with psycopg.connect(**database_parameters(), autocommit=False) as holder:
        holder.execute("LOCK TABLE rebyte_remotesession IN SHARE MODE")
        receipt = post_message(api, "and this one?", attachmentIds=[photo])
        wait_until(
            lambda: (
                rebyte_double.state()["counts"]["sessions"] == 1
                and waiting_for_a_lock('%INSERT INTO "rebyte_remotesession"%')
            ),
            timeout=30,
            what="the worker to wait to adopt the session it created with the image",
        )
        doomed.kill()
        holder.rollback()
    stack.start_worker("successor")

    run = finished_run(receipt["submissionId"], timeout=120)
    expected = "Echo: and this one? [image 100x300 jpeg]"
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == expected
    assert Message.objects.filter(role=MessageRole.ASSISTANT, text=expected).count() == 1
    state = rebyte_double.state()
    assert (state["counts"]["sessions"], state["counts"]["turns"]) == (1, 1)
    assert state["input_events"] == []
    assert Counter(request["op"] for request in rebyte_double.requests())["create_session"] == 1


def test_a_photo_larger_than_a_request_may_be_reaches_the_provider_smaller(workers, api, rebyte_double):
    out = io.BytesIO()
    Image.frombytes("RGB", (2048, 1536), os.urandom(2048 * 1536 * 3)).save(out, format="JPEG", quality=95)
    assert out.tell() > 1024 * 1024  # more than the double takes in one request
    photo = uploaded(api, out.getvalue(), "noise.jpg", "image/jpeg")

    run = finished_run(post_message(api, "and this?", attachmentIds=[photo])["submissionId"])

    assert run.state == RunState.COMPLETED
    reply = run.submission.assistant_message.text
    assert reply.startswith("Echo: and this? [image ") and reply.endswith(" jpeg]")
    width, height = map(int, reply.removeprefix("Echo: and this? [image ").split()[0].split("x"))
    assert width < 2048 and width * 3 == height * 4
