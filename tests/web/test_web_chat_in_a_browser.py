"""The web chat in headless Chromium against daphne, a real worker and the Rebyte double."""

import json
import shutil

import pytest
from django.contrib.auth.hashers import make_password

from tests.factories import PASSWORD
from tests.processes import start_web

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # The page plays `play_sound` through Web Audio; a real tab gets this from the user's first click.
    "--autoplay-policy=no-user-gesture-required",
]


@pytest.fixture
def browser_page(stack, user):
    # Playwright's sync API runs an event loop in this thread, where Django refuses ORM calls:
    # everything the test needs from the database (the user) is created before it starts.
    from playwright.sync_api import sync_playwright

    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")  # what daphne's settings verify
    user.save()

    _, base_url = start_web(stack)
    stack.start_worker()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(base_url=base_url)
        page.set_default_timeout(30_000)
        yield page
        browser.close()


def log_in(page, user):
    page.goto("/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("#connection[data-state=live]")


def send(page, text):
    page.fill("#message-text", text)
    page.click("#send")


def last_assistant(page):
    return page.locator(".message.role-assistant").last


def test_a_message_sent_in_the_web_chat_shows_the_streamed_reply(browser_page, user):
    log_in(browser_page, user)

    send(browser_page, "hello browser")

    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    assert reply.locator(".text").inner_text() == "Echo: hello browser"
    assert browser_page.locator(".message.role-user .text").inner_text() == "hello browser"


def test_reloading_mid_stream_still_shows_the_complete_reply_once(browser_page, user, rebyte_double):
    rebyte_double.configure(delta_delay_ms=400, delta_chunks=8)
    log_in(browser_page, user)
    send(browser_page, "reload me while I am streaming")
    last_assistant(browser_page).locator(".status-running").wait_for()
    browser_page.wait_for_function(
        "() => [...document.querySelectorAll('.role-assistant .text')].some(node => node.textContent.length > 0)"
    )

    browser_page.reload()

    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    assert reply.locator(".text").inner_text() == "Echo: reload me while I am streaming"
    assert browser_page.locator(".message").count() == 2


def test_the_login_page_refuses_a_wrong_password(browser_page, user):
    browser_page.goto("/login/")
    browser_page.fill("input[name=username]", user.username)
    browser_page.fill("input[name=password]", "not the password")
    browser_page.click("button[type=submit]")

    assert "didn't match" in browser_page.locator(".error").inner_text()


def history(page) -> dict:
    return page.evaluate("() => fetch('/api/v1/conversation').then((response) => response.json())")


def test_the_web_chat_is_a_device_that_plays_a_sound_once_and_keeps_its_receipt(browser_page, user):
    log_in(browser_page, user)

    send(browser_page, '/tool play_sound {"sound": "chime"}')

    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    played = {"output": {"durationMs": 400, "played": "chime"}}
    expected_reply = f"Tool play_sound returned: {json.dumps(played['output'], separators=(',', ':'))}"
    assert reply.locator(".text").inner_text() == expected_reply
    assert reply.locator(".tool").inner_text() == "play_sound: completed"
    receipts = browser_page.evaluate("() => JSON.parse(localStorage.getItem('impo.deviceReceipts'))")
    [receipt] = receipts.values()
    assert receipt["delivered"] is True and receipt["answer"] == "accepted"
    assert receipt["result"]["success"] is True and receipt["result"]["output"] == played["output"]

    browser_page.reload()
    browser_page.wait_for_selector("#connection[data-state=live]")

    # The reloaded page rebuilds the tool's state from execution state, and nothing ran again.
    assert last_assistant(browser_page).locator(".tool").inner_text() == "play_sound: completed"
    assert history(browser_page)["messages"][-1]["tools"] == [
        {"toolCallId": receipt_call_id(browser_page), "toolName": "play_sound", "state": "completed", "errorCode": None}
    ]
    assert browser_page.evaluate("() => JSON.parse(localStorage.getItem('impo.deviceReceipts'))") == receipts


def receipt_call_id(page) -> str:
    return page.locator(".role-assistant .tool").last.get_attribute("data-tool-call-id")


def test_a_sound_the_browser_cannot_play_is_reported_as_the_devices_error(browser_page, user):
    log_in(browser_page, user)

    send(browser_page, '/tool play_sound {"sound": "kazoo"}')

    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    assert reply.locator(".tool").inner_text() == 'play_sound: failed — No sound named "kazoo".'
