"""axe-core, run in the browser on each page: no serious or critical accessibility violations."""

import pytest

from tests.web.conftest import last_assistant, log_in, run_axe, send, submit_plan


def test_the_login_page_has_no_serious_accessibility_violations(browser_page):
    browser_page.goto("/login/")

    assert run_axe(browser_page) == []


def test_the_chat_page_with_a_reply_and_a_tool_call_has_no_serious_accessibility_violations(browser_page, user):
    log_in(browser_page, user)
    assert run_axe(browser_page) == []  # the empty state

    send(browser_page, "**Hello** with `code` and [a link](https://example.org/)")
    last_assistant(browser_page).locator(".status-completed").wait_for()
    send(browser_page, '/tool play_sound {"sound": "kazoo"}')
    last_assistant(browser_page).locator(".status-completed").wait_for()
    last_assistant(browser_page).locator(".tool > summary").click()

    assert run_axe(browser_page) == []


@pytest.mark.parametrize("path", ["/tasks/", "/schedules/", "/account/"])
def test_a_list_page_has_no_serious_accessibility_violations(browser_page, user, path):
    log_in(browser_page, user)
    browser_page.goto(path)
    browser_page.wait_for_load_state("networkidle")

    assert run_axe(browser_page) == []


def test_a_schedules_page_with_a_plan_has_no_serious_accessibility_violations(browser_page, user):
    log_in(browser_page, user)
    browser_page.goto("/schedules/")
    submit_plan(browser_page, "Digest", "Summarise.")
    browser_page.locator(".schedule").wait_for()
    browser_page.locator(".schedule details.runs summary").click()

    assert run_axe(browser_page) == []
