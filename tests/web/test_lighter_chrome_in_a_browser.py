"""Lighter chrome: the reply is plain text on the page and the person's words a light bubble; a message's actions are
icons named for screen readers, out of sight until the message is hovered or holds the keyboard's focus on a laptop,
always in sight on a phone's touch screen; the approval card says it waits for the person once, asks a reason only
after Deny, and offers "Always allow for this tool" where the tool takes it (revoked from the account page)."""

import re

from playwright.sync_api import expect

from tests.web.conftest import WIDTHS, last_assistant, log_in, run_axe, send, send_and_wait

SAVE_MILK = '/tool save_note {"text": "buy milk"}'


def touch_page(site):
    narrow = WIDTHS["narrow"]
    context = site.browser.new_context(base_url=site.base_url, viewport=narrow, has_touch=True, is_mobile=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    return page


def asked_to_approve(page, user, text=SAVE_MILK):
    """Signed in, a call sent that waits for the person's answer; its reply."""
    log_in(page, user)
    send(page, text)
    return last_assistant(page)


def test_actions_show_on_hover_or_focus_on_a_laptop_and_replies_have_no_bubble(browser_page, user):
    page = browser_page
    page.set_viewport_size(WIDTHS["wide"])
    log_in(page, user)
    send_and_wait(page, "first")
    reply = send_and_wait(page, "second")
    asked = page.locator(".message.role-user").last
    page.mouse.move(1, 1)

    copy = reply.get_by_role("button", name="Copy reply")
    regenerate = reply.get_by_role("button", name="Regenerate this reply")
    edit = asked.get_by_role("button", name=re.compile(r"^Edit your message"))
    for action in (copy, regenerate, reply.get_by_role("button", name="Good reply"), edit):
        expect(action).to_have_css("opacity", "0")
    expect(copy).to_have_attribute("title", "Copy")
    expect(regenerate).to_have_attribute("title", "Regenerate")
    expect(edit).to_have_attribute("title", "Edit")

    reply.hover()
    expect(copy).to_have_css("opacity", "1")
    expect(regenerate).to_have_css("opacity", "1")
    expect(edit).to_have_css("opacity", "0")  # only the message under the pointer
    asked.hover()
    expect(edit).to_have_css("opacity", "1")
    expect(copy).to_have_css("opacity", "0")

    page.mouse.move(1, 1)
    copy.focus()  # a keyboard reaches them in order: the focus inside the message shows them
    expect(copy).to_have_css("opacity", "1")
    page.keyboard.press("Tab")
    expect(reply.get_by_role("button", name="Good reply")).to_be_focused()
    expect(reply.get_by_role("button", name="Good reply")).to_have_css("opacity", "1")
    page.keyboard.press("Enter")
    expect(reply.get_by_role("button", name="Good reply")).to_have_attribute("aria-pressed", "true")
    page.locator("#message-text").focus()
    expect(reply.get_by_role("button", name="Good reply")).to_have_css("opacity", "1")  # a pressed thumb stays
    expect(copy).to_have_css("opacity", "0")

    assert reply.evaluate("(node) => getComputedStyle(node).backgroundColor") == "rgba(0, 0, 0, 0)"
    assert asked.evaluate("(node) => getComputedStyle(node).backgroundColor") != "rgba(0, 0, 0, 0)"
    assert run_axe(page) == []


def test_actions_are_always_in_sight_on_a_touch_screen(site, user):
    page = touch_page(site)
    log_in(page, user)
    reply = send_and_wait(page, "on the phone")
    asked = page.locator(".message.role-user").last

    for action in (
        reply.get_by_role("button", name="Copy reply"),
        reply.get_by_role("button", name="Regenerate this reply"),
        reply.get_by_role("button", name="Bad reply"),
        asked.get_by_role("button", name=re.compile(r"^Edit your message")),
    ):
        expect(action).to_have_css("opacity", "1")
        box = action.bounding_box()
        assert box["width"] >= 24 and box["height"] >= 24  # a target a thumb can hit

    asked.get_by_role("button", name=re.compile(r"^Edit your message")).tap()
    expect(page.locator(".message-editor .edit-text")).to_be_focused()
    assert run_axe(page) == []


def test_the_approval_card_says_waiting_once_and_asks_a_reason_only_after_deny(
    save_note_needs_approval, sized_page, user
):
    page = sized_page
    reply = asked_to_approve(page, user)
    once = reply.get_by_role("button", name="Allow once")
    expect(once).to_be_visible()

    assert len(re.findall("waiting for your approval", reply.inner_text(), re.IGNORECASE)) == 1
    reason = reply.get_by_role("textbox", name=re.compile("^Reason"))
    expect(reason).to_be_hidden()
    expect(reply.get_by_role("button", name="Always allow for this tool")).to_be_visible()
    assert run_axe(page) == []

    reply.get_by_role("button", name="Deny").click()
    expect(reason).to_be_visible()
    expect(reason).to_be_focused()
    expect(once).to_be_hidden()
    reply.get_by_role("button", name="Cancel").click()  # changed my mind
    expect(reason).to_be_hidden()
    expect(reply.get_by_role("button", name="Deny")).to_be_focused()

    reply.get_by_role("button", name="Deny").click()
    reason.fill("I have milk")
    reply.get_by_role("button", name="Confirm deny").click()

    expect(reply.locator(".status-completed")).to_have_count(1)
    expect(reply.locator(".tool")).to_have_attribute("data-state", "failed")
    expect(reply.locator(".tool-error .error-sentence")).to_have_text("The user denied this call: I have milk")


def test_always_allow_runs_the_next_call_unasked_until_revoked_on_the_account_page(
    save_note_needs_approval, sized_page, user
):
    page = sized_page
    sound = asked_to_approve(page, user, '/tool play_sound {"sound": "chime"}')  # a device tool, not marked
    expect(sound.get_by_role("button", name="Allow once")).to_be_visible()
    expect(sound.get_by_role("button", name="Always allow for this tool")).to_have_count(0)
    sound.get_by_role("button", name="Deny").click()
    sound.get_by_role("button", name="Confirm deny").click()
    expect(sound.locator(".status-completed")).to_have_count(1)

    send(page, SAVE_MILK)
    reply = last_assistant(page)
    reply.get_by_role("button", name="Always allow for this tool").click()
    expect(reply.locator(".status-completed")).to_have_count(1)
    expect(reply.locator(".tool")).to_have_attribute("data-state", "completed")

    unasked = send_and_wait(page, '/tool save_note {"text": "buy bread"}')
    expect(unasked.locator(".tool")).to_have_attribute("data-state", "completed")
    expect(unasked.get_by_role("button", name="Allow once")).to_have_count(0)

    page.goto("/account/")
    granted = page.locator("#tool-permissions li")
    expect(granted).to_have_count(1)
    expect(granted).to_contain_text("Save a note")
    assert run_axe(page) == []
    page.get_by_role("button", name="Revoke: Save a note").click()
    expect(granted).to_have_count(0)
    expect(page.locator("#tool-permissions-none")).to_be_visible()

    page.goto("/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    send(page, '/tool save_note {"text": "buy eggs"}')
    expect(last_assistant(page).get_by_role("button", name="Allow once")).to_be_visible()  # asked again
