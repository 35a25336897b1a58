"""Deleting from the web chat (docs/data-lifecycle.md "Deleting"): a Task from the sidebar, Main Chat's Clear, and the
account from its page, each confirmed; another page open on a deleted chat says so instead of reconnecting."""

from playwright.sync_api import expect

from tests.factories import PASSWORD
from tests.web.conftest import last_assistant, log_in, send, send_and_wait, start_task


def accept_the_confirm(page):
    page.once("dialog", lambda dialog: dialog.accept())


def test_a_task_deleted_from_the_sidebar_is_gone_and_its_other_page_says_so(site, user):
    page = site.new_page()
    log_in(page, user)
    start_task(page, "plan a picnic")
    task_url = page.url
    other = site.new_page()
    log_in(other, user, wait_for_chat=False)
    other.goto(task_url)
    other.wait_for_selector("#connection[data-state=live]")

    page.once("dialog", lambda dialog: dialog.dismiss())  # thought better of it: nothing happens
    page.click("#side-chats button[aria-label='Delete “plan a picnic”']")
    assert page.url == task_url
    accept_the_confirm(page)
    page.click("#side-chats button[aria-label='Delete “plan a picnic”']")

    page.wait_for_url(site.base_url + "/")
    page.wait_for_selector("#connection[data-state=live]")
    page.wait_for_function("() => !document.getElementById('side-chats').innerText.includes('plan a picnic')")
    other.wait_for_selector("#connection[data-state=deleted]")
    assert "This chat was deleted" in other.locator("#chat-error").inner_text()
    assert other.locator("#message-text").is_disabled()
    assert page.goto(task_url).status == 404


def test_clearing_main_chat_leaves_an_empty_one_that_goes_on(site, user):
    page = site.new_page()
    log_in(page, user)
    send_and_wait(page, "remember this")

    accept_the_confirm(page)
    page.click("#clear-chat")

    page.wait_for_selector("#connection[data-state=live]")
    page.locator(".message").first.wait_for(state="detached")
    expect(page.locator("#empty-state")).to_be_visible()
    reply = send_and_wait(page, "a fresh start")
    assert "a fresh start" in reply.inner_text()


def test_the_account_is_deleted_only_with_its_password_checked_before_it_is_confirmed(site, user):
    page = site.new_page()
    log_in(page, user)
    send(page, "hello")
    last_assistant(page).locator(".status-completed").wait_for()
    page.goto("/account/")
    asked = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))

    page.fill("#delete-password", "not my password")
    page.click("#delete-account button[type=submit]")
    expect(page.locator("#delete-account-error")).to_contain_text("That is not your password. Nothing was deleted.")
    assert asked == []  # a wrong password is said before "for good?" is asked

    page.fill("#delete-password", PASSWORD)
    page.click("#delete-account button[type=submit]")
    page.wait_for_url("**/login/?account=deleted")
    expect(page.locator(".login [role=status]")).to_contain_text("Your account was deleted.")
    assert asked == ["Delete your account and everything in it, for good?"]
    log_in(page, user, wait_for_chat=False)
    page.locator(".errorlist, .error").first.wait_for()
    assert "/login/" in page.url
