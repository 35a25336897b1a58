"""Thumbs up and down under a reply, at a laptop's and a phone's width: pressed, kept across a reload (history's
`feedback`), changed, and taken back by pressing again; each a labelled toggle button."""

from playwright.sync_api import expect

from tests.web.conftest import log_in, send_and_wait


def test_a_reply_is_rated_and_the_rating_is_kept_changed_and_taken_back(sized_page, user):
    page = sized_page
    log_in(page, user)
    send_and_wait(page, "rate me")

    def buttons():
        reply = page.locator(".message.role-assistant").last
        return reply.get_by_role("button", name="Good reply"), reply.get_by_role("button", name="Bad reply")

    up, down = buttons()
    expect(up).to_have_attribute("aria-pressed", "false")
    expect(down).to_have_attribute("aria-pressed", "false")
    up.click()
    expect(up).to_have_attribute("aria-pressed", "true")
    expect(up).to_be_focused()

    page.reload()
    page.wait_for_selector("#connection[data-state=live]")
    up, down = buttons()
    expect(up).to_have_attribute("aria-pressed", "true")  # read back from the history
    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    expect(up).to_have_attribute("aria-pressed", "false")
    down.click()
    expect(down).to_have_attribute("aria-pressed", "false")

    page.reload()
    page.wait_for_selector("#connection[data-state=live]")
    for button in buttons():
        expect(button).to_have_attribute("aria-pressed", "false")
        box = button.bounding_box()
        assert box["width"] >= 24 and box["height"] >= 24  # a target a thumb can hit
