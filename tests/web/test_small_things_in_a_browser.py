"""The small things a newcomer meets: Return on a phone, Enter in the Tasks box, a one-off schedule that has run, a
wrong password, the admin in the dark and at 1280 px, a one-line code block, the composer's focus ring."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Plan
from tests.web.conftest import _verifiable_password, last_assistant, log_in, send


@pytest.fixture
def one_off_plan_that_ran(api):
    run_at = (timezone.now() + timedelta(days=1)).replace(microsecond=0).isoformat()
    schedule = {"frequency": "once", "timeZone": "UTC", "runAt": run_at, "time": None, "weekdays": None, "cron": None}
    body = {"clientRequestId": str(uuid.uuid4()), "title": "Call mum", "goal": "Remind me.", "enabled": True}
    response = api.post("/api/v1/scheduled-tasks", {**body, "schedule": schedule}, format="json")
    assert response.status_code == 201, response.json()
    # What its one firing leaves behind (scheduling.services): nothing planned next.
    Plan.objects.filter(id=response.json()["id"]).update(next_run_at=None)


@pytest.fixture
def staff_can_log_in(staff):
    _verifiable_password(staff)
    return staff


def test_on_a_touch_screen_return_breaks_the_line_and_the_send_button_sends(site, user):
    page = site.new_page(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    log_in(page, user)
    assert page.evaluate("() => matchMedia('(pointer: coarse)').matches")
    assert page.get_attribute("#message-text", "placeholder") == "Message"  # short enough not to be clipped

    page.fill("#message-text", "first line")
    page.press("#message-text", "Enter")
    page.keyboard.type("second line")
    assert page.input_value("#message-text") == "first line\nsecond line"
    assert page.locator(".message").count() == 0  # Return sent nothing

    page.locator("#send").tap()
    last_assistant(page).locator(".status-completed").wait_for()
    assert last_assistant(page).locator(".text").inner_text() == "Echo: first line\nsecond line"


def test_enter_in_the_tasks_box_starts_the_task_as_enter_sends_in_a_chat(browser_page, user):
    page = browser_page
    log_in(page, user)
    page.goto("/tasks/new/")
    page.fill("#message-text", "water the plants")
    page.press("#message-text", "Shift+Enter")
    page.keyboard.type("and the roses")
    page.press("#message-text", "Enter")
    page.wait_for_url("**/tasks/*-*/")
    assert page.locator("#chat-title").inner_text() == "water the plants"


def test_a_one_off_schedule_that_has_run_is_done_not_active(one_off_plan_that_ran, browser_page, user):
    page = browser_page
    log_in(page, user)
    page.goto("/schedules/")
    plan = page.locator(".schedule", has_text="Call mum")
    assert plan.locator(".status").inner_text() == "Done"
    assert plan.locator("button.pause").count() == 0  # nothing left to pause
    assert plan.locator(".schedule-next").inner_text() == "No run planned"


def test_a_wrong_password_keeps_the_username_and_asks_for_the_password_again(browser_page, user):
    page = browser_page
    page.goto("/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "not the password")
    page.click("button[type=submit]")
    page.locator(".login .error").wait_for()
    assert page.input_value("input[name=username]") == user.username
    assert page.input_value("input[name=password]") == ""
    assert page.evaluate("() => document.activeElement.name") == "password"


def test_the_admin_follows_the_chats_dark_mode_and_the_runs_list_fits_1280_pixels(staff_can_log_in, site, staff):
    page = site.new_page(viewport={"width": 1280, "height": 800}, color_scheme="light")
    log_in(page, staff)
    send(page, "a run for the list")
    last_assistant(page).locator(".status-completed").wait_for()
    page.click("#theme-toggle")  # dark, picked in the chat
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"

    page.goto("/admin/runtime/run/")
    page.locator("#result_list").wait_for()
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(255, 255, 255)"
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")  # nothing cut off


def test_a_one_line_code_block_has_its_language_and_a_copy_button_that_covers_nothing(browser_page, user):
    page = browser_page
    log_in(page, user)
    send(page, "One line:\n```python\nx = 1\n```")
    reply = last_assistant(page)
    reply.locator(".status-completed").wait_for()

    block = reply.locator(".code-block")
    assert block.locator(".code-language").inner_text() == "python"
    copy = block.locator("button.copy").bounding_box()
    code = block.locator("code").bounding_box()
    assert copy["y"] + copy["height"] <= code["y"]  # above the code, never over it


def test_the_composers_focus_ring_is_the_calm_accent_not_the_warning_orange(browser_page, user):
    page = browser_page
    log_in(page, user)
    page.focus("#message-text")
    page.keyboard.type("x")
    ring = page.evaluate("() => getComputedStyle(document.getElementById('message-text')).outlineColor")
    accent = page.evaluate("() => getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()")
    assert ring == "rgb(11, 87, 208)" and accent == "#0b57d0"
