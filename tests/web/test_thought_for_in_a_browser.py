"""Reasoning kept: once a reply's first words come, what the agent thought stays above it as a closed "Thought for
N s", its Markdown rendered, and after a reload the history brings it back (docs/api.md "Progress (`run.progress`)").

The double reasons before each answer (its `reasoning_summaries` knob); the second message goes to the session the
first one created, whose live stream the worker reads from the turn's start. At a laptop's and a phone's width."""

import re

from playwright.sync_api import expect

from tests.web.conftest import last_assistant, log_in, run_axe, send, send_and_wait


def test_the_reasoning_stays_above_the_reply_as_thought_for_and_comes_back_after_a_reload(
    sized_page, user, rebyte_double
):
    page = sized_page
    rebyte_double.configure(reasoning_summaries=True)
    log_in(page, user)
    send_and_wait(page, "warm up")
    rebyte_double.configure(delta_delay_ms=300)

    send(page, "think it over")
    reply = last_assistant(page)
    expect(reply.locator(".progress-line summary")).to_have_text("Thinking: Reading the message")  # no "**"
    thought = reply.locator("details.reasoning")
    expect(thought).to_be_hidden()  # until the reply's first words
    expect(reply.locator(".text")).to_contain_text("Echo:")
    expect(thought.locator("summary")).to_have_text(_thought_for())
    expect(reply.locator(".progress-line")).to_be_hidden()
    expect(reply.locator(".status-completed")).to_be_attached()
    expect(thought).not_to_have_attribute("open", "")
    thought.locator("summary").click()
    expect(thought.locator(".reasoning-text strong")).to_have_text("Reading the message")  # Markdown, rendered
    expect(thought.locator(".reasoning-text")).not_to_contain_text("**")
    assert run_axe(page) == []
    expect(reply.locator(".text")).to_have_text("Echo: think it over")  # the reasoning is never the reply's text

    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    thought = last_assistant(page).locator("details.reasoning")
    expect(thought.locator("summary")).to_have_text(_thought_for())
    thought.locator("summary").click()
    expect(thought.locator(".reasoning-text")).to_contain_text("The message says")
    expect(last_assistant(page).locator(".progress-line")).to_be_hidden()


def test_a_reply_without_reasoning_shows_no_thought_for(sized_page, user):
    log_in(sized_page, user)
    send_and_wait(sized_page, "just answer")

    expect(last_assistant(sized_page).locator("details.reasoning")).to_be_hidden()


def _thought_for():
    return re.compile(r"^Thought for \d+ s$")
