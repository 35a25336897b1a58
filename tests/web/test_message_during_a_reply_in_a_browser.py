"""Sending while a reply streams: the web chat asks whether to wait for the reply or stop it."""

from tests.web.conftest import last_assistant, log_in, send


def assistant_replies(page):
    return page.locator(".message.role-assistant")


def test_stopping_the_reply_from_the_choice_cancels_it_and_runs_the_new_message(browser_page, user, rebyte_double):
    rebyte_double.configure(delta_delay_ms=100)  # /slow: one character a second
    log_in(browser_page, user)
    send(browser_page, "/slow a reply long enough to be interrupted")
    last_assistant(browser_page).locator(".status-running").wait_for()

    send(browser_page, "the next question")
    browser_page.locator("#send-choice").wait_for(state="visible")
    browser_page.click("#send-choice button[data-policy=interrupt]")

    assistant_replies(browser_page).first.locator(".status-cancelled").wait_for()
    reply = assistant_replies(browser_page).nth(1)
    reply.locator(".status-completed").wait_for()
    assert reply.locator(".text").inner_text() == "Echo: the next question"
    assert browser_page.locator("#send-choice").is_hidden()


def test_waiting_for_the_reply_from_the_choice_runs_the_new_message_after_it(browser_page, user, rebyte_double):
    rebyte_double.configure(delta_delay_ms=30)
    log_in(browser_page, user)
    send(browser_page, "/slow first")
    last_assistant(browser_page).locator(".status-running").wait_for()

    send(browser_page, "second")
    browser_page.locator("#send-choice").wait_for(state="visible")
    browser_page.click("#send-choice button[data-policy=queue]")

    replies = assistant_replies(browser_page)
    replies.nth(1).locator(".status-completed").wait_for()
    assert replies.first.locator(".status-completed").count() == 1
    assert [replies.nth(index).locator(".text").inner_text() for index in range(2)] == ["Echo: first", "Echo: second"]
