"""The "thinking / doing" line: while a paced reply runs, the agent's reasoning summary shows above it as one line
that opens to the reasoning so far; the reply's first words replace it, and the reply's text never holds it.

The double reasons before each answer (its `reasoning_summaries` knob); the second message goes to the session the
first one created, whose live stream the worker reads from the turn's start."""

from tests.web.conftest import history, last_assistant, log_in, run_axe, send, send_and_wait


def test_the_progress_line_shows_the_reasoning_during_a_paced_reply_and_the_reply_replaces_it(
    browser_page, user, rebyte_double
):
    rebyte_double.configure(reasoning_summaries=True)
    log_in(browser_page, user)
    send_and_wait(browser_page, "warm up")
    rebyte_double.configure(delta_delay_ms=500)  # the summary streams for about two seconds, then the reply

    send(browser_page, "think it over")
    reply = last_assistant(browser_page)
    line = reply.locator(".progress-line")
    line.locator("summary", has_text="Thinking: Reading the message").wait_for()
    line.locator("summary").click()  # it opens to the reasoning so far
    reply.locator(".progress-detail", has_text="The message says").wait_for()
    assert run_axe(browser_page) == []

    reply.locator(".text", has_text="Echo:").wait_for()
    assert line.is_hidden()  # replaced by the reply's first words
    reply.locator(".status-completed").wait_for()
    assert line.is_hidden()
    assert reply.locator(".text").inner_text() == "Echo: think it over"
    assert [m["text"] for m in history(browser_page)["messages"] if m["role"] == "assistant"][-1] == (
        "Echo: think it over"
    )
    assert "Reading the message" not in reply.inner_text()


def test_after_a_reload_a_finished_reply_shows_no_progress_line(browser_page, user, rebyte_double):
    rebyte_double.configure(reasoning_summaries=True)
    log_in(browser_page, user)
    send_and_wait(browser_page, "warm up")
    send_and_wait(browser_page, "and again")

    browser_page.reload()
    browser_page.wait_for_selector("#connection[data-state=live]")

    assert last_assistant(browser_page).locator(".text").inner_text() == "Echo: and again"
    assert browser_page.locator(".progress-line:visible").count() == 0


def test_a_call_waiting_for_approval_is_what_the_line_says_until_it_is_answered(
    save_note_needs_approval, browser_page, user
):
    log_in(browser_page, user)
    send(browser_page, '/tool save_note {"text": "buy milk"}')
    reply = last_assistant(browser_page)

    reply.locator(".progress-line summary", has_text="Save a note needs your answer").wait_for()
    reply.locator(".approval-approve").click()

    reply.locator(".status-completed").wait_for()
    assert reply.locator(".progress-line").is_hidden()
