"""Small things said right in the web chat: a code block whose fence names no language is labelled "text" (not
highlight.js's guess), a reply in two parts shows two paragraphs, a blank chat name is refused in words, and Escape
closes the Notifications panel."""

from playwright.sync_api import expect

from rebyte.double.agent import TWO_BLOCKS
from tests.web.conftest import log_in, send_and_wait


def test_a_code_block_whose_fence_names_no_language_is_labelled_text(browser_page, user):
    page = browser_page
    log_in(page, user)

    reply = send_and_wait(page, "Plain:\n```\nbody { color: red; }\n```")  # what highlight.js guesses is CSS

    block = reply.locator(".code-block")
    expect(block.locator(".code-language")).to_have_text("text")
    expect(block.locator("button.copy")).to_have_accessible_name("Copy text code")
    assert block.locator("code [class^=hljs-]").count() == 0  # not coloured as a language it is not


def test_a_reply_in_two_parts_shows_each_as_a_paragraph_of_its_own(browser_page, user):
    page = browser_page
    log_in(page, user)

    reply = send_and_wait(page, "/blocks")

    expect(reply.locator(".text p")).to_have_text(list(TWO_BLOCKS))


def test_a_blank_chat_name_is_refused_in_plain_words(browser_page, user):
    page = browser_page
    log_in(page, user)
    send_and_wait(page, "hello")
    title = page.locator("#chat-title").inner_text()

    for blank in ("", "   "):
        page.click("#rename-chat")
        page.fill("#rename-input", blank)
        page.press("#rename-input", "Enter")

        expect(page.locator("#rename-error")).to_have_text(
            "A name can't be empty. Type one, or press Escape to keep the old one."
        )
        expect(page.locator("#rename-input")).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#rename-input")).to_be_focused()
        page.press("#rename-input", "Escape")
        expect(page.locator("#chat-title")).to_have_text(title)


def test_escape_closes_the_notifications_panel_and_gives_the_focus_back_to_its_button(browser_page, user):
    page = browser_page
    log_in(page, user)
    panel = page.locator("details.notify")
    button = panel.locator("summary")

    button.click()
    expect(panel).to_have_attribute("open", "")
    page.locator("#notify-toggle").focus()
    page.keyboard.press("Escape")

    expect(panel).not_to_have_attribute("open", "")
    expect(button).to_be_focused()
