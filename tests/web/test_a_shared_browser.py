"""Two people on one browser: a message one left unsent is never posted as the other's."""

from tests.web.conftest import history, log_in, log_out

UNSENT = "A's private note that never got through"


def leave_a_message_unsent(page):
    # The network drops for this post only: the command stays pending, shown as a bubble not sent yet.
    page.route("**/api/v1/conversation/messages", lambda route: route.abort())
    page.fill("#message-text", UNSENT)
    page.click("#send")
    page.locator("#composer-note").wait_for()
    page.unroute("**/api/v1/conversation/messages")
    page.locator(".message.is-pending", has_text=UNSENT).wait_for()
    assert UNSENT in page.evaluate("() => JSON.stringify(localStorage)")


def test_a_pending_message_is_forgotten_at_logout_and_never_sent_as_the_next_user(browser_page, user, other_user):
    log_in(browser_page, user)
    leave_a_message_unsent(browser_page)

    log_out(browser_page)
    assert UNSENT not in browser_page.evaluate("() => JSON.stringify(localStorage)")
    log_in(browser_page, other_user)
    browser_page.wait_for_function("() => window.ImpoChat !== undefined")

    assert history(browser_page)["messages"] == []
    assert browser_page.locator(".message").count() == 0


def test_a_pending_message_left_without_logout_is_kept_for_its_own_user_only(site, user, other_user):
    page = site.new_page()
    log_in(page, user)
    leave_a_message_unsent(page)

    # The session ends without the logout button (expired, cleared): the store outlives it.
    page.context.clear_cookies()
    log_in(page, other_user)
    assert history(page)["messages"] == []

    assert UNSENT in page.evaluate("() => JSON.stringify(localStorage)")  # still A's, untouched
    page.context.clear_cookies()
    log_in(page, user)
    page.locator(".message.role-user:not(.is-pending)", has_text=UNSENT).wait_for()
    assert [m["text"] for m in history(page)["messages"] if m["role"] == "user"] == [UNSENT]
