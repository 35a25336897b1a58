"""The sidebar's chats in a browser, at a laptop's and a phone's width: Main Chat and every Task newest activity
first, found by the words in their titles and messages, renamed from the chat's header, and axe-clean."""

import uuid

from tests.web.conftest import last_assistant, log_in, open_sidebar, post_json, run_axe, send


def chat_titles(sidebar):
    return sidebar.locator(".side-task-title").all_inner_texts()


def start(page, text):
    answer = post_json(page, "/api/v1/tasks", {"clientMessageId": str(uuid.uuid4()), "text": text})
    assert answer["status"] == 202
    return answer["body"]


def test_the_sidebar_lists_every_chat_newest_activity_first_and_search_narrows_it(sized_page, user):
    page = sized_page
    log_in(page, user)
    start(page, "Water the plants")
    send(page, "Remind me about the dentist")
    last_assistant(page).locator(".status-completed").wait_for()
    start(page, "Sort the holiday photos")
    page.reload()
    page.wait_for_selector("#connection[data-state=live]")

    sidebar = open_sidebar(page)
    sidebar.locator(".side-task-title").nth(2).wait_for()
    assert chat_titles(sidebar) == ["Sort the holiday photos", "Main Chat", "Water the plants"]
    assert sidebar.locator("[aria-current=page] .side-task-title").inner_text() == "Main Chat"

    sidebar.locator("#side-search").fill("dent")  # a word's beginning, in a message (not a title)
    sidebar.locator(".side-task-title").filter(has_text="Water").wait_for(state="detached")
    assert chat_titles(sidebar) == ["Main Chat"]
    assert run_axe(page) == []

    sidebar.locator("#side-search").fill("no such words")
    sidebar.locator("#side-chats-empty", has_text="No chats match “no such words”.").wait_for()
    assert chat_titles(sidebar) == []

    sidebar.locator("#side-search").fill("photos")
    sidebar.locator(".side-task-title", has_text="Sort the holiday photos").click()
    page.wait_for_url("**/tasks/*-*/")
    assert page.locator("#chat-title").inner_text() == "Sort the holiday photos"


def test_a_chat_is_renamed_from_its_header_and_escape_cancels(sized_page, user):
    page = sized_page
    log_in(page, user)
    task = start(page, "Water the plants")
    page.goto(f"/tasks/{task['taskId']}/")
    last_assistant(page).locator(".status-completed").wait_for()

    page.click("#rename-chat")
    assert page.evaluate("() => document.activeElement.id") == "rename-input"
    page.fill("#rename-input", "Never mind")
    page.keyboard.press("Escape")
    assert page.locator("#chat-title").inner_text() == "Water the plants"
    assert page.evaluate("() => document.activeElement.id") == "rename-chat"

    page.click("#rename-chat")
    page.fill("#rename-input", "   ")
    page.keyboard.press("Enter")
    page.locator("#rename-error").wait_for()
    assert page.get_attribute("#rename-input", "aria-invalid") == "true"
    assert run_axe(page) == []  # the open field, with its error

    page.fill("#rename-input", "Garden")
    page.keyboard.press("Enter")
    page.locator("#chat-title", has_text="Garden").wait_for()
    assert page.title() == "Garden · Impo"
    sidebar = open_sidebar(page)
    sidebar.locator("[aria-current=page] .side-task-title", has_text="Garden").wait_for()
    page.reload()
    assert page.locator("#chat-title").inner_text() == "Garden"


def test_a_task_page_is_a_full_chat_with_follow_ups_and_stop(site, user, rebyte_double):
    page = site.new_page()
    log_in(page, user)
    task = start(page, "Water the plants")
    page.goto(f"/tasks/{task['taskId']}/")
    last_assistant(page).locator(".status-completed").wait_for()

    rebyte_double.configure(delta_delay_ms=100)
    send(page, "/slow and the lawn, please")
    page.locator("#send[data-mode=stop]").wait_for()
    page.click("#send")
    last_assistant(page).locator(".status-cancelled").wait_for()
    rebyte_double.configure(delta_delay_ms=0)
    send(page, "and the roses")
    last_assistant(page).locator(".status-completed").wait_for()
    assert last_assistant(page).locator(".text").inner_text() == "Echo: and the roses"
