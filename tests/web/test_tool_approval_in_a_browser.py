"""The web chat's Approve / Deny / Edit on a call waiting for approval, its state rebuilt from the server."""

from tests.web.conftest import history, last_assistant, log_in, send

SAVE_MILK = '/tool save_note {"text": "buy milk"}'


def test_a_call_is_approved_after_a_reload_and_runs(save_note_needs_approval, browser_page, user):
    log_in(browser_page, user)
    send(browser_page, SAVE_MILK)
    last_assistant(browser_page).locator(".approval-approve").wait_for()

    browser_page.reload()
    browser_page.wait_for_selector("#connection[data-state=live]")
    reply = last_assistant(browser_page)
    assert reply.locator(".tool").get_attribute("data-state") == "awaiting_approval"
    assert reply.locator(".status").get_attribute("data-status") == "waiting_approval"
    reply.locator(".approval-approve").click()

    reply.locator(".status-completed").wait_for()
    assert reply.locator(".text").inner_text().startswith('Tool save_note returned: {"noteId":')
    assert reply.locator(".tool").get_attribute("data-state") == "completed"
    assert reply.locator(".approval-approve").count() == 0
    [tool] = history(browser_page)["messages"][-1]["tools"]
    assert (tool["state"], tool["approval"]["status"], tool["approval"]["outcome"]) == (
        "completed",
        "approved",
        "approved",
    )


def test_an_edited_call_runs_with_the_edited_arguments(save_note_needs_approval, browser_page, user):
    log_in(browser_page, user)
    send(browser_page, SAVE_MILK)
    reply = last_assistant(browser_page)
    reply.locator(".approval-edit").click()

    reply.locator(".approval-arguments").fill('{"text": "buy oat milk"}')
    reply.locator(".approval-approve").click()

    reply.locator(".status-completed").wait_for()
    [tool] = history(browser_page)["messages"][-1]["tools"]
    assert (tool["input"], tool["approval"]["outcome"]) == ({"text": "buy oat milk"}, "edited")


def test_a_denial_with_a_reason_is_shown_and_told_to_the_agent(save_note_needs_approval, browser_page, user):
    log_in(browser_page, user)
    send(browser_page, SAVE_MILK)
    reply = last_assistant(browser_page)

    reply.locator(".approval-deny").click()
    reply.locator(".approval-reason").fill("I have milk")
    reply.locator(".approval-confirm-deny").click()

    reply.locator(".status-completed").wait_for()
    assert reply.locator(".tool").get_attribute("data-state") == "failed"
    assert reply.locator(".tool-error .error-sentence").inner_text() == "The user denied this call: I have milk"
    expected = "Tool save_note failed: approval_denied: The user denied this call: I have milk"
    assert reply.locator(".text").inner_text() == expected
