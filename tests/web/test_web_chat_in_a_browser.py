"""The web chat in headless Chromium against daphne, a real worker and the Rebyte double."""

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
