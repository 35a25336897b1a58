"""A failed reply's words follow its error's kind and retryability: the agent's own failure and a refusal offer no
"Try again" (it would fail the same way), a passing overload does; Details sits under the sentence and copies."""

from playwright.sync_api import expect

from tests.web.conftest import history, last_assistant, log_in, run_axe, send


def failed_reply(page, text):
    send(page, text)
    reply = last_assistant(page)
    reply.locator(".status-failed").wait_for(timeout=90_000)
    return reply


def test_the_agents_own_failure_offers_no_retry_and_its_details_copy(browser_page, user):
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    log_in(page, user)

    reply = failed_reply(page, "/fail the kettle is offline")

    assert history(page)["messages"][-1]["error"]["retryable"] is False
    problem = reply.locator(".run-error")
    assert problem.locator(".error-sentence").inner_text() == "The assistant failed while answering."
    assert reply.locator("button.try-again").count() == 0
    problem.locator(".error-details summary").click()
    sentence = problem.locator(".error-sentence").bounding_box()
    summary = problem.locator(".error-details summary").bounding_box()
    assert abs(sentence["x"] - summary["x"]) < 2 and summary["y"] >= sentence["y"] + sentence["height"] - 1  # under it
    assert run_axe(page) == []
    problem.locator(".error-details button.copy").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == "internal_error: the kettle is offline"


def test_a_refusal_by_the_provider_says_refused_not_unreachable(browser_page, user, rebyte_double):
    page = browser_page
    log_in(page, user)
    send(page, "warm up")  # the session exists: the next message is an input of its own, which the provider refuses
    last_assistant(page).locator(".status-completed").wait_for()
    rebyte_double.fault("input_message", "http_error", status=400)

    reply = failed_reply(page, "hello")

    sentence = reply.locator(".run-error .error-sentence").inner_text()
    assert sentence == "The assistant's service refused this request."
    assert "reached" not in sentence
    assert reply.locator("button.try-again").count() == 0


def test_a_passing_overload_offers_try_again(browser_page, user):
    page = browser_page
    log_in(page, user)

    reply = failed_reply(page, "/busy")

    assert history(page)["messages"][-1]["error"] == {
        "code": "server_overloaded",
        "message": "Asked to be busy",
        "retryable": True,
    }
    assert reply.locator(".run-error .error-sentence").inner_text() == (
        "The assistant's service is overloaded just now. Try again."
    )
    expect(reply.locator("button.try-again")).to_be_visible()
