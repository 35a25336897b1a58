"""axe-core in the light and the dark theme on each page and each state of a reply a person meets: no serious or
critical violation (colour contrast included, so both palettes are checked)."""

import pytest

from tests.web.conftest import last_assistant, log_in, run_axe, send, start_task, submit_plan

THEMES = ["light", "dark"]


@pytest.fixture(params=THEMES)
def themed_page(request, site):
    page = site.new_page(color_scheme=request.param)
    page.theme = request.param
    return page


def checked(page) -> list[dict]:
    assert page.evaluate("() => document.documentElement.dataset.theme") == page.theme
    return run_axe(page)


def test_login_and_not_found(themed_page, user):
    themed_page.goto("/login/")
    assert checked(themed_page) == []
    themed_page.goto("/no-such-page/")
    assert checked(themed_page) == []
    log_in(themed_page, user)
    themed_page.goto("/no-such-page/")
    assert checked(themed_page) == []


def test_chat_empty_streaming_and_failed(themed_page, user, rebyte_double):
    page = themed_page
    rebyte_double.configure(delta_delay_ms=100)
    log_in(page, user)
    assert checked(page) == []  # the empty state

    send(page, "/slow a reply streaming in ```code``` and **bold**")
    page.wait_for_function("() => (document.querySelector('.role-assistant .text') || {}).textContent?.length > 3")
    assert last_assistant(page).locator(".status-running").count() == 1
    assert checked(page) == []  # streaming
    page.click("#send")  # Stop
    last_assistant(page).locator(".status-cancelled").wait_for()

    rebyte_double.configure(delta_delay_ms=20)
    send(page, "Code:\n```python\nprint('hi')  # a comment\n```\n\n- a bullet")
    last_assistant(page).locator(".status-completed").wait_for()
    send(page, "/fail on purpose")
    last_assistant(page).locator(".status-failed").wait_for(timeout=90_000)
    last_assistant(page).locator(".error-details summary").click()
    assert checked(page) == []  # failed, with Try again, details open, highlighted code and copy buttons


def test_chat_with_an_approval_pending(save_note_needs_approval, themed_page, user):
    log_in(themed_page, user)
    send(themed_page, '/tool save_note {"text": "buy milk"}')
    last_assistant(themed_page).locator(".approval-approve").wait_for()

    assert checked(themed_page) == []


def test_tasks_and_schedules(themed_page, user):
    page = themed_page
    log_in(page, user)
    start_task(page, "water the plants")
    page.goto("/tasks/")
    page.locator("#side-chats li").first.wait_for()
    assert checked(page) == []

    page.goto("/schedules/")
    submit_plan(page, "Digest", "Summarise.")
    page.locator(".schedule").wait_for()
    submit_plan(page, " ", "Never runs.", frequency="cron", cron="not a cron")
    page.locator("#schedule-form .field-error").first.wait_for()
    assert checked(page) == []


def test_the_account_page_with_a_refused_password(themed_page, user):
    page = themed_page
    log_in(page, user)
    page.goto("/account/")
    page.click("#delete-account button[type=submit]")  # no password: said beside the field, nothing asked
    page.locator("#delete-account-error").wait_for()
    assert checked(page) == []
