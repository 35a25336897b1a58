"""The web chat's core promises in a browser: streamed replies, reload mid-stream, the page as a device."""

import json
import time

from tests.web.conftest import history, last_assistant, log_in, send


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


def test_the_web_chat_is_a_device_that_plays_a_sound_once_and_keeps_its_receipt(browser_page, user):
    log_in(browser_page, user)

    send(browser_page, '/tool play_sound {"sound": "chime"}')

    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    played = {"output": {"durationMs": 400, "played": "chime"}}
    expected_reply = f"Tool play_sound returned: {json.dumps(played['output'], separators=(',', ':'))}"
    assert reply.locator(".text").inner_text() == expected_reply
    assert reply.locator(".tool").get_attribute("data-state") == "completed"
    assert tool_summary(reply) == ("Play a sound", "Done")
    receipts = browser_page.evaluate("() => JSON.parse(localStorage.getItem('impo.deviceReceipts'))")
    [receipt] = receipts.values()
    assert receipt["delivered"] is True and receipt["answer"] == "accepted"
    assert receipt["result"]["success"] is True and receipt["result"]["output"] == played["output"]

    browser_page.reload()
    browser_page.wait_for_selector("#connection[data-state=live]")

    # The reloaded page rebuilds the tool's state from execution state, and nothing ran again.
    assert tool_summary(last_assistant(browser_page)) == ("Play a sound", "Done")
    assert history(browser_page)["messages"][-1]["tools"] == [
        {
            "toolCallId": receipt_call_id(browser_page),
            "toolName": "play_sound",
            "state": "completed",
            "errorCode": None,
            "input": {"sound": "chime"},
            "output": played["output"],
            "errorMessage": None,
            "approval": None,  # the harness turns play_sound's approval off (tests/isolation.py)
        }
    ]
    assert browser_page.evaluate("() => JSON.parse(localStorage.getItem('impo.deviceReceipts'))") == receipts


def tool_summary(reply) -> tuple[str, str]:
    tool = reply.locator(".tool")
    return tool.locator(".tool-name").inner_text(), tool.locator(".tool-state").inner_text()


def receipt_call_id(page) -> str:
    return page.locator(".role-assistant .tool").last.get_attribute("data-tool-call-id")


def test_a_sound_the_browser_cannot_play_is_reported_as_the_devices_error(browser_page, user):
    log_in(browser_page, user)

    send(browser_page, '/tool play_sound {"sound": "kazoo"}')

    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    tool = reply.locator(".tool")
    assert tool.get_attribute("data-state") == "failed"
    assert tool.locator(".tool-state").inner_text() == "Failed"
    assert tool.locator(".tool-error .error-sentence").inner_text() == 'No sound named "kazoo".'


# Counts every tone any page of the browser starts, in storage all its tabs share.
COUNT_SOUNDS = """
(() => {
  const Original = window.AudioContext;
  window.AudioContext = function (...args) {
    const context = new Original(...args);
    const createOscillator = context.createOscillator.bind(context);
    context.createOscillator = () => {
      const oscillator = createOscillator();
      const start = oscillator.start.bind(oscillator);
      oscillator.start = (...when) => {
        localStorage.setItem("test.tones", String(Number(localStorage.getItem("test.tones") || "0") + 1));
        return start(...when);
      };
      return oscillator;
    };
    return context;
  };
})();
"""


def test_two_tabs_of_one_browser_play_a_device_call_once_between_them(site, user):
    context = site.browser.new_context(base_url=site.base_url)
    context.add_init_script(COUNT_SOUNDS)
    # A slow network on the claim: both tabs have looked for a receipt before either claim is answered.
    context.route("**/claim", lambda route: (time.sleep(0.5), route.continue_()))
    first, second = context.new_page(), context.new_page()
    for page in (first, second):
        page.set_default_timeout(30_000)
    log_in(first, user)
    second.goto("/")
    second.wait_for_selector("#connection[data-state=live]")

    send(first, '/tool play_sound {"sound": "chime"}')  # chime: two tones

    for page in (first, second):
        last_assistant(page).locator(".status-completed").wait_for()
    assert first.evaluate("() => localStorage.getItem('test.tones')") == "2"
    [tool] = history(first)["messages"][-1]["tools"]
    assert tool["state"] == "completed"
    context.close()
