"""A new Task is an empty composer: "+ New task" in the sidebar opens it with one line saying how a task differs from
Main Chat, the first message starts it (POST /api/v1/tasks) and the page becomes the task's; the sidebar names it a
Task with its state (running, needs approval, failed…). At a laptop's and a phone's width."""

import re

from playwright.sync_api import expect

from tests.web.conftest import last_assistant, log_in, open_sidebar, run_axe

DIFFERENCE = (
    "Unlike Main Chat, a task has a conversation of its own and a narrower set of tools, and runs in the background"
)


def test_new_task_is_an_empty_composer_whose_first_message_starts_the_task(sized_page, user):
    page = sized_page
    log_in(page, user)
    sidebar = open_sidebar(page)
    expect(sidebar.locator("a", has_text="New chat")).to_have_count(0)

    sidebar.locator("a", has_text="+ New task").click()

    expect(page).to_have_url(re.compile(r"/tasks/new/$"))
    expect(page.locator("h1")).to_have_text("New task")
    expect(page.locator("#task-difference")).to_contain_text(DIFFERENCE)
    expect(page.locator("#message-text")).to_be_focused()
    expect(page.get_by_text("Describe a task to run in the background")).to_have_count(0)
    assert run_axe(page) == []

    page.fill("#message-text", "tidy the desk")
    page.press("#message-text", "Enter")

    expect(page).to_have_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    expect(page.locator(".message.role-user .text")).to_have_text("tidy the desk")
    expect(last_assistant(page).locator(".status-completed")).to_be_attached()
    sidebar = open_sidebar(page)
    current = sidebar.locator("[aria-current=page]")
    expect(current.locator(".side-task-title")).to_have_text("tidy the desk")
    expect(current.locator(".side-kind")).to_have_text("Task")
    expect(current.locator("[data-status=completed]")).to_have_text("Done")
    expect(sidebar.locator("a", has_text="Main Chat").locator(".side-kind")).to_have_count(0)


def test_the_old_new_chat_address_and_the_tasks_list_lead_to_the_new_task_composer(sized_page, user):
    page = sized_page
    log_in(page, user)

    page.goto("/tasks/#task-text")
    expect(page).to_have_url(re.compile(r"/tasks/new/$"))
    page.goto("/tasks/")
    page.locator("main a", has_text="+ New task").click()
    expect(page).to_have_url(re.compile(r"/tasks/new/$"))


def test_a_task_waiting_for_approval_says_so_in_the_sidebar(save_note_needs_approval, sized_page, user):
    page = sized_page
    log_in(page, user)
    page.goto("/tasks/new/")
    page.fill("#message-text", '/tool save_note {"text": "buy milk"}')
    page.click("#send")
    expect(page).to_have_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    expect(last_assistant(page).locator(".approval-approve")).to_be_visible()

    sidebar = open_sidebar(page)
    expect(sidebar.locator("[aria-current=page] .status")).to_have_text("Needs approval")
    if page.narrow:
        page.keyboard.press("Escape")
    last_assistant(page).locator(".approval-approve").click()
    expect(last_assistant(page).locator(".status-completed")).to_be_attached()
    sidebar = open_sidebar(page)
    expect(sidebar.locator("[aria-current=page] .status")).to_have_text("Done")
