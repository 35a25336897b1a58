"""Regenerate in the web chat: the control on the last reply, the new version shown as "2 / 2", and "‹ ›" paging
between the versions, which history keeps across a reload; at a laptop's and a phone's width."""

from tests.web.conftest import history, log_in, run_axe, send_and_wait


def focused_class(page) -> str:
    return page.evaluate("() => document.activeElement.className")


def test_a_regenerated_reply_shows_2_of_2_and_pages_back_to_the_replaced_1_of_2(sized_page, user, rebyte_double):
    page = sized_page
    log_in(page, user)
    rebyte_double.fault("create_session", "http_error", status=400)  # the first version fails: the provider refused
    replaced = send_and_wait(page, "hello", "failed")
    assert replaced.locator("button.regenerate").count() == 1

    replaced.locator("button.regenerate").click()

    latest = page.locator(".message.role-assistant").nth(1)
    latest.locator(".status-completed").wait_for(timeout=90_000)
    assert latest.locator(".text").inner_text() == "Echo: hello"
    assert latest.locator(".attempt-position").inner_text() == "2 / 2"
    assert replaced.is_hidden() and page.locator(".message.role-assistant:visible").count() == 1
    assert latest.locator("button.regenerate").count() == 1  # the last reply again

    latest.locator(".attempt-previous").click()

    replaced.locator(".status-failed").wait_for()
    assert latest.is_hidden()
    assert replaced.locator(".attempt-position").inner_text() == "1 / 2"
    assert replaced.locator("button.regenerate").count() == 0  # not the last reply
    assert replaced.locator(".attempt-previous").is_disabled()
    assert "attempt-next" in focused_class(page)  # the keyboard stays on the pager
    assert run_axe(page) == []

    page.keyboard.press("Enter")

    latest.locator(".attempt-position").wait_for()
    assert replaced.is_hidden() and latest.locator(".attempt-position").inner_text() == "2 / 2"

    page.reload()
    page.wait_for_selector("#connection[data-state=live]")
    assert page.locator(".message.role-assistant:visible .attempt-position").inner_text() == "2 / 2"
    assert page.locator(".message.role-assistant:visible .text").inner_text() == "Echo: hello"
    replies = [m for m in history(page)["messages"] if m["role"] == "assistant"]
    assert [(m["attempt"], m["status"]) for m in replies] == [(1, "failed"), (2, "completed")]


def test_the_next_message_after_a_regeneration_moves_the_control_to_its_reply(sized_page, user):
    page = sized_page
    log_in(page, user)
    send_and_wait(page, "first")
    page.locator("button.regenerate").click()
    page.locator(".message.role-assistant .attempt-position", has_text="2 / 2").wait_for()
    page.locator(".message.role-assistant:visible .status-completed").wait_for(timeout=90_000)

    reply = send_and_wait(page, "second")

    assert page.locator("button.regenerate").count() == 1
    assert reply.locator("button.regenerate").count() == 1
    assert reply.locator(".attempts").count() == 0  # one version only
