"""Takes the screenshots of the lighter chrome, the edit branch and the approval card (not part of the suite):
`SHOTS_STAGE=after pytest tests/web/screenshots_chrome.py` (`before` on the commit before them), at a laptop's and
a phone's width (the phone as a touch screen), light theme, 1x, into docs/screenshots/."""

import os

from tests.web.conftest import WIDTHS, last_assistant, log_in, send, send_and_wait
from tests.web.screenshots import OUT

STAGE = os.environ.get("SHOTS_STAGE", "after")


def _page(site, width):
    touch = {"has_touch": True, "is_mobile": True} if width == "narrow" else {}
    context = site.browser.new_context(
        base_url=site.base_url, viewport=WIDTHS[width], color_scheme="light", device_scale_factor=1, **touch
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    return page


def test_chrome_and_approval_card(save_note_needs_approval, site, user):
    page = _page(site, "wide")
    log_in(page, user)
    send_and_wait(page, "Suggest a name for a grey cat.")
    send_and_wait(page, "Show me a loop in Python.")
    send(page, '/tool save_note {"text": "buy milk and photo paper"}')
    last_assistant(page).locator(".approval-approve").wait_for()
    for width in WIDTHS:
        shot = _page(site, width)
        log_in(shot, user)
        last_assistant(shot).locator(".approval-approve").wait_for()
        if STAGE == "after" and width == "wide":
            shot.locator(".message.role-assistant").nth(1).hover()
        shot.screenshot(path=OUT / f"chrome-{STAGE}-{width}.png")
        if STAGE == "after" and width == "wide":
            # A system notification is drawn outside the page: the card's own Allow once / Always allow stand for it.
            last_assistant(shot).locator(".tool").screenshot(path=OUT / "approval-notification.png")


def test_edit_branch(site, user, other_user):
    for width, person in (("wide", user), ("narrow", other_user)):  # each its own Main Chat
        page = _page(site, width)
        log_in(page, person)
        send_and_wait(page, "first question")
        send_and_wait(page, "helo wrld")
        message = page.locator(".message.role-user").last
        message.hover()
        message.locator(".edit-message").click()
        page.locator(".message-editor .edit-text").fill("hello world")
        page.locator(".message-editor .edit-save").click()
        answered = page.locator(".message.role-assistant", has=page.locator(".text", has_text="Echo: hello world"))
        answered.locator(".status-completed").wait_for(timeout=90_000)
        page.locator(".message.role-user:visible .version-position", has_text="2 / 2").wait_for()
        page.mouse.move(1, 1)
        page.screenshot(path=OUT / f"edit-branch-{width}.png")
