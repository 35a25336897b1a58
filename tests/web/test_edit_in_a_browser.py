"""Edit in the web chat: the last message opened in place (Save, Cancel, Escape), its new version shown as "2 / 2" with
its own reply, and "‹ ›" on the message paging back to the earlier version and the reply it had, which history keeps
across a reload; at a laptop's and a phone's width."""

from playwright.sync_api import expect

from tests.web.conftest import history, log_in, run_axe, send_and_wait


def user_message(page, text):
    return page.locator(".message.role-user", has=page.locator(".text", has_text=text))


def reply(page, text):
    return page.locator(".message.role-assistant", has=page.locator(".text", has_text=text))


def test_an_edited_message_shows_2_of_2_and_pages_back_to_the_first_version_and_its_reply(sized_page, user):
    page = sized_page
    log_in(page, user)
    send_and_wait(page, "first question")
    send_and_wait(page, "helo wrld")
    edit = page.locator(".message.role-user .edit-message")
    expect(edit).to_have_count(1)  # only on the last message
    expect(user_message(page, "helo wrld").locator(".edit-message")).to_have_count(1)

    edit.click()
    editor = page.locator(".message-editor .edit-text")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("helo wrld")
    page.keyboard.press("Escape")  # changed my mind
    expect(page.locator(".message-editor")).to_have_count(0)
    expect(edit).to_be_focused()
    expect(user_message(page, "helo wrld")).to_be_visible()

    edit.click()
    editor.fill("hello world")
    page.locator(".message-editor .edit-save").click()

    new_reply = reply(page, "Echo: hello world")
    expect(new_reply.locator(".status-completed")).to_have_count(1, timeout=90_000)
    edited = user_message(page, "hello world")
    expect(edited.locator(".version-position")).to_have_text("2 / 2")
    expect(user_message(page, "helo wrld")).to_be_hidden()
    expect(reply(page, "Echo: helo wrld")).to_be_hidden()
    expect(user_message(page, "first question")).to_be_visible()
    expect(edited.locator(".edit-message")).to_have_count(1)

    edited.locator(".version-previous").click()

    earlier = user_message(page, "helo wrld")
    expect(earlier).to_be_visible()
    expect(earlier.locator(".version-position")).to_have_text("1 / 2")
    expect(reply(page, "Echo: helo wrld")).to_be_visible()  # the reply shown follows the version
    expect(edited).to_be_hidden()
    expect(new_reply).to_be_hidden()
    expect(earlier.locator(".version-previous")).to_be_disabled()
    expect(earlier.locator(".version-next")).to_be_focused()  # the keyboard stays on the pager
    assert run_axe(page) == []

    page.keyboard.press("Enter")

    expect(edited).to_be_visible()
    expect(new_reply).to_be_visible()
    expect(earlier).to_be_hidden()

    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(edited.locator(".version-position")).to_have_text("2 / 2")
    expect(new_reply).to_be_visible()
    expect(earlier).to_be_hidden()
    edited.locator(".version-previous").click()
    expect(reply(page, "Echo: helo wrld")).to_be_visible()
    users = [(m["text"], m["version"]) for m in history(page)["messages"] if m["role"] == "user"]
    assert users == [("first question", 1), ("helo wrld", 1), ("hello world", 2)]


def test_the_editor_saves_with_enter_and_keeps_the_conversation_going_on_the_new_branch(sized_page, user):
    page = sized_page
    log_in(page, user)
    send_and_wait(page, "draft")
    page.locator(".message.role-user .edit-message").focus()
    page.keyboard.press("Enter")  # Edit, from the keyboard
    editor = page.locator(".message-editor .edit-text")
    expect(editor).to_be_focused()
    assert run_axe(page) == []  # the editor open
    editor.fill("final")
    editor.press("Enter")
    expect(reply(page, "Echo: final").locator(".status-completed")).to_have_count(1, timeout=90_000)

    send_and_wait(page, "and then")

    expect(page.locator(".message.role-user .edit-message")).to_have_count(1)
    expect(user_message(page, "and then").locator(".edit-message")).to_have_count(1)
    user_message(page, "final").locator(".version-previous").click()
    expect(reply(page, "Echo: draft")).to_be_visible()
    expect(user_message(page, "and then")).to_be_hidden()  # the later turn belongs to the current branch
    expect(reply(page, "Echo: and then")).to_be_hidden()
