"""Complete reads a document's text once, within its page and character bounds, and keeps it."""

import pytest

from attachments.models import Attachment
from tests.attachments.files import pdf, upload, word

pytestmark = pytest.mark.django_db

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_a_pdfs_text_and_pages_are_kept(api):
    done = upload(api, pdf("The first page says hello", "The second page says goodbye"), "talk.pdf", "application/pdf")

    assert done.json()["pages"] == 2
    attachment = Attachment.objects.get(client_id=done.json()["id"])
    assert attachment.text == "The first page says hello\nThe second page says goodbye"
    assert attachment.text_cut is False


def test_a_word_documents_text_is_kept(api):
    done = upload(api, word("Dear Ada,", "the engine runs."), "letter.docx", DOCX)

    assert done.json()["kind"] == "document"
    assert "pages" not in done.json()
    assert Attachment.objects.get(client_id=done.json()["id"]).text == "Dear Ada,\nthe engine runs."


def test_pages_past_the_bound_are_not_read(api, settings):
    settings.IMPO_ATTACHMENT_MAX_PAGES = 2

    done = upload(api, pdf("one", "two", "three"), "long.pdf", "application/pdf")

    attachment = Attachment.objects.get(client_id=done.json()["id"])
    assert (attachment.pages, attachment.text, attachment.text_cut) == (3, "one\ntwo", True)


def test_text_past_the_character_bound_is_cut(api, settings):
    settings.IMPO_ATTACHMENT_TEXT_CHARS = 10

    done = upload(api, b"0123456789abcdef", "notes.txt", "text/plain")

    attachment = Attachment.objects.get(client_id=done.json()["id"])
    assert (attachment.text, attachment.text_cut) == ("0123456789", True)
