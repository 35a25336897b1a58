"""Tool cards people read: the registry's title and one-line summary, the arguments as a short line with the raw
JSON behind Details, and an approval card that says what happens and until when, in relative words."""

import re

from tests.web.conftest import last_assistant, log_in, run_axe, send


def test_a_tool_card_has_a_title_a_summary_and_its_arguments_in_short(browser_page, user):
    page = browser_page
    log_in(page, user)
    assert "asks for your approval" in page.locator("#empty-state").inner_text()  # the sample command says so

    send(page, '/tool current_time {"timeZone": "Europe/Paris"}')
    reply = last_assistant(page)
    reply.locator(".status-completed").wait_for()
    card = reply.locator(".tool")
    assert card.locator(".tool-name").inner_text() == "Tell the time"
    assert card.locator(".tool-args").inner_text() == "timeZone: Europe/Paris"
    card.locator("summary").first.click()
    about = "Reads the current date and time, in your time zone unless another is named."
    assert card.locator(".tool-about").inner_text() == about
    raw = card.locator(".tool-raw pre")
    assert raw.is_hidden()  # the JSON only behind Details
    card.locator(".tool-raw summary").click()
    assert raw.inner_text() == 'current_time {\n  "timeZone": "Europe/Paris"\n}'
    assert run_axe(page) == []


def test_an_approval_card_says_when_it_is_denied_in_relative_words(save_note_needs_approval, browser_page, user):
    page = browser_page
    log_in(page, user)

    send(page, '/tool save_note {"text": "buy milk"}')
    reply = last_assistant(page)
    reply.locator(".approval-approve").wait_for()

    card = reply.locator(".tool")
    assert card.locator(".tool-name").inner_text() == "Save a note"
    assert card.locator(".tool-args").inner_text() == "text: buy milk"
    note = card.locator(".tool-approval .tool-note")
    words = r"Denied automatically in (\d+ min|\d+ h( \d+ min)?) if unanswered\."  # "waiting" is the card's state
    assert re.fullmatch(words, note.inner_text()), note.inner_text()
    assert note.get_attribute("title").startswith("Denied at ")  # the exact time on hover
    assert run_axe(page) == []

    reply.locator(".approval-approve").click()
    reply.locator(".status-completed").wait_for()
    assert card.locator(".tool-approval .tool-note").count() == 0
