"""What people expect of a chat page: Enter to send, safe Markdown, a steady view while a reply streams,
the reason a run failed kept across a reload, and a layout that fits a phone."""

from playwright.sync_api import expect

from tests.web.conftest import last_assistant, log_in, send

LONG_WORD = "unbroken" * 40


def test_the_composer_is_focused_enter_sends_and_shift_enter_breaks_the_line(browser_page, user):
    log_in(browser_page, user)
    assert browser_page.evaluate("() => document.activeElement.id") == "message-text"

    browser_page.keyboard.type("first line")
    browser_page.keyboard.press("Shift+Enter")
    browser_page.keyboard.type("second line")
    browser_page.keyboard.press("Enter")

    last_assistant(browser_page).locator(".status-completed").wait_for()
    assert browser_page.locator(".message.role-user .text").inner_text() == "first line\nsecond line"
    assert browser_page.input_value("#message-text") == ""


def test_markdown_from_the_agent_is_formatted_and_executes_nothing(browser_page, user):
    log_in(browser_page, user)
    hostile = (
        "**bold** and `code`\n\n"
        '<img src="/nothing" onerror="window.pwned = \'img\'">\n\n'
        "<script>window.pwned = 'script'</script>\n\n"
        "[a link](javascript:window.pwned='link') and [a page](https://example.org/)\n\n"
        "```\nprint('block')\n```"
    )

    send(browser_page, hostile)
    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    text = reply.locator(".text")
    text.locator("a", has_text="a link").click()

    assert browser_page.evaluate("() => window.pwned") is None
    assert text.locator("strong").inner_text() == "bold"
    assert text.locator("pre code").inner_text().strip() == "print('block')"
    assert text.locator("img, script, [onerror]").count() == 0
    assert text.locator("a", has_text="a link").get_attribute("href") is None
    page_link = text.locator("a", has_text="a page")
    assert page_link.get_attribute("href") == "https://example.org/"
    assert page_link.get_attribute("rel") == "noopener noreferrer nofollow"
    # The person's own text is shown as they typed it, never as HTML.
    assert "<script>" in browser_page.locator(".message.role-user .text").inner_text()


def test_scrolling_up_while_a_reply_streams_keeps_the_view_and_the_selection(site, user, rebyte_double):
    page = site.new_page(viewport={"width": 900, "height": 600})
    log_in(page, user)
    many_lines = "\n".join(f"line {n}" for n in range(40))
    send(page, many_lines)
    last_assistant(page).locator(".status-completed").wait_for()
    rebyte_double.configure(delta_delay_ms=250, delta_chunks=24)

    send(page, many_lines)
    last_assistant(page).locator(".status-running").wait_for()
    page.evaluate(
        """() => {
            const list = document.getElementById('messages');
            list.scrollTop = 0;
            const first = document.querySelector('.message .text');
            getSelection().selectAllChildren(first);
            window.textAtScroll = document.querySelector('.role-assistant:last-child .text').textContent.length;
        }"""
    )
    page.wait_for_function(
        "() => document.querySelector('.role-assistant:last-child .text').textContent.length > window.textAtScroll + 20"
    )

    assert page.evaluate("() => document.getElementById('messages').scrollTop") == 0
    assert page.evaluate("() => getSelection().toString()").startswith("line 0")
    last_assistant(page).locator(".status-completed").wait_for()
    assert page.evaluate("() => document.getElementById('messages').scrollTop") == 0


def test_a_reply_that_follows_the_end_keeps_following_it(browser_page, user, rebyte_double):
    log_in(browser_page, user)
    rebyte_double.configure(delta_delay_ms=50, delta_chunks=12)

    send(browser_page, "\n".join(f"row {n}" for n in range(60)))
    last_assistant(browser_page).locator(".status-completed").wait_for()

    distance_from_end = (
        "() => { const l = document.getElementById('messages'); return l.scrollHeight - l.scrollTop - l.clientHeight; }"
    )
    assert browser_page.evaluate(distance_from_end) < 48


def test_a_failed_runs_reason_is_shown_and_survives_a_reload(browser_page, user):
    log_in(browser_page, user)

    send(browser_page, "/fail The kettle is offline")
    reply = last_assistant(browser_page)
    reply.locator(".status-failed").wait_for()
    sentence = "The assistant failed while answering."  # not retryable: no advice to try again, no button
    assert reply.locator(".run-error .error-sentence").inner_text() == sentence
    assert reply.locator(".run-error .error-details code").text_content() == "internal_error: The kettle is offline"
    assert reply.locator("button.try-again").count() == 0

    browser_page.reload()
    browser_page.wait_for_selector("#connection[data-state=live]")

    reply = last_assistant(browser_page)
    assert reply.locator(".status-failed").inner_text() == "Failed"
    assert reply.locator(".run-error .error-sentence").inner_text() == sentence
    assert reply.locator(".run-error .error-details code").text_content() == "internal_error: The kettle is offline"


def test_at_390_pixels_nothing_overflows_sideways_and_the_header_stays_on_one_line(site, user):
    page = site.new_page(viewport={"width": 390, "height": 844})
    log_in(page, user)
    send(page, f"{LONG_WORD}\n\n```\n{'wide code ' * 30}\n```")
    last_assistant(page).locator(".status-completed").wait_for()
    send(page, f'/tool save_note {{"text": "{LONG_WORD}"}}')
    last_assistant(page).locator(".status-completed").wait_for()
    last_assistant(page).locator(".tool > summary").click()

    for path in ("/", "/tasks/", "/schedules/"):
        if path != "/":
            page.goto(path)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390, path
        # One line: every item of the header overlaps every other vertically.
        spans = page.evaluate(
            "() => [...document.querySelectorAll('.bar > *')].map((e) => {"
            " const r = e.getBoundingClientRect(); return [r.top, r.bottom]; })"
        )
        assert len(spans) >= 3 and max(top for top, _ in spans) < min(bottom for _, bottom in spans), (path, spans)
    page.goto("/")
    page.wait_for_selector("#connection[data-state=live]")
    right_edges = page.evaluate(
        "() => [...document.querySelectorAll('.message')].map((m) => m.getBoundingClientRect().right)"
    )
    assert right_edges and max(right_edges) <= 390


def test_an_empty_conversation_says_what_the_agent_can_do_and_an_empty_running_reply_shows_typing(
    browser_page, user, rebyte_double
):
    log_in(browser_page, user)
    expect(browser_page.locator("#empty-state")).to_be_visible()
    empty_state = browser_page.locator("#empty-state").inner_text()
    assert "Start a conversation" in empty_state
    assert "/tool" in empty_state  # the local echo agent uses a tool only when asked by name
    rebyte_double.configure(delta_delay_ms=1500, delta_chunks=2)

    send(browser_page, "take your time")

    last_assistant(browser_page).locator(".typing").wait_for()
    assert browser_page.locator("#empty-state").is_hidden()
    assert browser_page.locator("#send").inner_text() == "Stop"
    last_assistant(browser_page).locator(".status-completed").wait_for()
    assert last_assistant(browser_page).locator(".typing").count() == 0
    assert browser_page.locator("#send").inner_text() == "Send"


def test_stop_cancels_the_streaming_reply(browser_page, user, rebyte_double):
    log_in(browser_page, user)
    rebyte_double.configure(delta_delay_ms=500, delta_chunks=30)
    send(browser_page, "a long answer please")
    last_assistant(browser_page).locator(".status-running").wait_for()

    browser_page.click("#send")

    reply = last_assistant(browser_page)
    reply.locator(".status-cancelled").wait_for()
    assert reply.locator(".status-cancelled").inner_text() == "Stopped"


def test_a_message_that_could_not_be_posted_is_a_pending_bubble_sent_when_the_connection_returns(browser_page, user):
    log_in(browser_page, user)
    browser_page.context.set_offline(True)

    send(browser_page, "sent from a train")
    browser_page.locator("#composer-note").wait_for()
    pending = browser_page.locator(".message.is-pending", has_text="sent from a train")
    assert pending.locator(".pending-note").inner_text() == "Not sent yet"
    assert browser_page.locator("#connection").get_attribute("data-state") == "offline"
    assert browser_page.input_value("#message-text") == ""

    browser_page.context.set_offline(False)
    browser_page.locator(".message.role-user:not(.is-pending)", has_text="sent from a train").wait_for()
    last_assistant(browser_page).locator(".status-completed").wait_for()
    assert browser_page.input_value("#message-text") == ""
    assert browser_page.locator("#composer-note").is_hidden()
    assert browser_page.locator(".message.role-user").count() == 1
