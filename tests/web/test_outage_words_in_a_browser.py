"""Words that follow the durable state (docs/api.md "The websocket"): a reply waiting out a provider outage, or a
doubtful answer Impo settles on its own, says "Reconnecting to the agent…" and keeps Stop, never that a person will
check; a retryable failure has one control to try again, its reason in sight, and a try that failed again says so.
The double's fault controls make the provider fail; at a laptop's and a phone's width."""

import re

import pytest
from playwright.sync_api import expect

from tests.web.conftest import last_assistant, log_in, run_axe, send, send_and_wait

RECONNECTING = "Reconnecting to the agent…"


def test_a_reply_during_a_provider_outage_says_it_reconnects_keeps_stop_and_completes_after(
    sized_page, user, rebyte_double
):
    page = sized_page
    log_in(page, user)
    send_and_wait(page, "warm up")
    rebyte_double.fault("*", "http_error", status=503, until_ended=True)  # ended below, once the page has said it

    send(page, "during the outage")
    reply = last_assistant(page)
    expect(reply.locator(".status-reconnecting")).to_have_text(RECONNECTING)
    expect(page.locator("#send")).to_have_text("Stop")
    expect(reply).not_to_contain_text("a person will check")
    assert run_axe(page) == []
    page.reload()  # the history says the same
    expect(last_assistant(page).locator(".status-reconnecting")).to_have_text(RECONNECTING)

    rebyte_double.end_faults()
    expect(last_assistant(page).locator(".status-completed")).to_be_attached(timeout=90_000)
    expect(last_assistant(page).locator(".text")).to_have_text("Echo: during the outage")
    expect(last_assistant(page).locator(".status-reconnecting")).to_have_count(0)


def test_a_retryable_failure_has_one_control_its_reason_in_sight_and_a_failed_retry_says_so(sized_page, user):
    page = sized_page
    log_in(page, user)
    send(page, "/busy the service is swamped")  # fails every attempt, retryably
    reply = last_assistant(page)
    expect(reply.locator(".status-failed")).to_be_attached(timeout=90_000)

    expect(reply.locator(".run-error .error-reason")).to_have_text("Reason: the service is swamped")  # without Details
    expect(reply.locator("button.try-again")).to_be_visible()
    expect(reply.locator("button.regenerate")).to_have_count(0)  # one way to try again, not two
    expect(reply.locator(".run-error .error-sentence")).not_to_contain_text("failed again")

    reply.locator("button.try-again").click()
    expect(reply.locator(".run-error .error-sentence")).to_have_text(
        re.compile(r"^Tried again, and it failed again\. The assistant's service is overloaded"), timeout=90_000
    )
    expect(reply.locator("button.try-again")).to_be_visible()
    expect(reply.locator("button.regenerate")).to_have_count(0)
    assert run_axe(page) == []
    page.reload()
    reply = last_assistant(page)
    expect(reply.locator(".run-error .error-sentence")).to_contain_text("Tried again, and it failed again.")
    expect(reply.locator(".run-error .error-reason")).to_have_text("Reason: the service is swamped")


@pytest.fixture
def sessions_in_doubt(stack):
    """Every message after the first needs a new session (whose create the test makes doubtful); the sweeper settles
    the doubt once the provider lists again. Listed before the page, so the web and worker processes start with it."""
    stack.env["IMPO_SESSION_MAX_TURNS"] = "1"
    stack.start_sweeper()


def test_a_doubt_impo_settles_on_its_own_says_it_reconnects_and_keeps_stop(
    sessions_in_doubt, sized_page, user, rebyte_double
):
    page = sized_page
    log_in(page, user)
    send_and_wait(page, "first question")
    rebyte_double.fault("create_session", "drop_response")  # the session is created; its answer is lost
    rebyte_double.fault("list_sessions", "http_error", status=503, until_ended=True)  # nor can anything tell

    send(page, "the doubtful one")
    reply = last_assistant(page)
    expect(reply.locator(".status-pending_reconciliation")).to_have_text(RECONNECTING, timeout=60_000)
    expect(page.locator("#send")).to_have_text("Stop")
    expect(reply).not_to_contain_text("a person will check")
    expect(reply.locator(".run-error")).to_have_count(0)

    rebyte_double.end_faults()
    expect(reply.locator(".status-completed")).to_be_attached(timeout=120_000)
    expect(reply.locator(".text")).to_have_text("Echo: the doubtful one")
