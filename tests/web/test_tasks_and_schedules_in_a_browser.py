"""Tasks and Scheduled tasks pages, driven as a person would."""

import uuid

from playwright.sync_api import expect

from tests.web.conftest import last_assistant, log_in, submit_plan


def test_starting_a_task_from_the_tasks_page_opens_it_with_its_reply(browser_page, user):
    log_in(browser_page, user)
    browser_page.goto("/tasks/")
    browser_page.click("main a:text-is('+ New task')")

    browser_page.fill("#message-text", "water the plants")
    browser_page.click("#send")

    browser_page.wait_for_url("**/tasks/*-*/")
    reply = last_assistant(browser_page)
    reply.locator(".status-completed").wait_for()
    assert reply.locator(".text").inner_text() == "Echo: water the plants"
    browser_page.goto("/tasks/")
    assert browser_page.locator(".tasks a", has_text="water the plants").count() == 1


def test_an_unknown_task_page_is_an_html_page_that_says_not_found(browser_page, user):
    log_in(browser_page, user)

    response = browser_page.goto(f"/tasks/{uuid.uuid4()}/")

    assert response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert browser_page.locator("h1").inner_text() == "Not found"
    expect(browser_page.locator("main a", has_text="Tasks")).to_be_visible()
    expect(browser_page.locator("#sidebar a", has_text="Main Chat")).to_be_visible()


def plans(page) -> list[dict]:
    return page.evaluate("() => fetch('/api/v1/scheduled-tasks').then((r) => r.json())")["schedules"]


def test_a_schedule_is_created_paused_edited_and_deleted_from_the_page(browser_page, user):
    log_in(browser_page, user)
    browser_page.goto("/schedules/")
    browser_page.locator("#schedule-empty").wait_for()

    submit_plan(
        browser_page,
        "Morning digest",
        "Summarise the news.",
        frequency="weekly",
        timeZone="Europe/Berlin",
        time="07:30",
        weekdays=[1, 5],
    )

    item = browser_page.locator(".schedule", has_text="Morning digest")
    item.wait_for()
    assert item.locator(".schedule-when").inner_text() == "Every Mon, Fri at 07:30 (Europe/Berlin)"
    [plan] = plans(browser_page)
    assert (plan["schedule"]["frequency"], plan["schedule"]["weekdays"], plan["enabled"]) == ("weekly", [1, 5], True)

    item.locator("button.pause").click()
    item.locator(".status-paused").wait_for()
    assert plans(browser_page)[0]["enabled"] is False

    item.locator("button.edit").click()
    browser_page.select_option("#schedule-form [name=frequency]", "cron")
    browser_page.fill("#schedule-form [name=cron]", "15 8 * * 1-5")
    browser_page.click("#schedule-save")
    item.locator(".schedule-when", has_text="15 8 * * 1-5").wait_for()
    [plan] = plans(browser_page)
    assert (plan["schedule"]["frequency"], plan["schedule"]["cron"], plan["enabled"]) == ("cron", "15 8 * * 1-5", False)

    item.locator("details.runs summary").click()
    item.locator(".run-list li", has_text="No runs yet.").wait_for()

    browser_page.once("dialog", lambda dialog: dialog.accept())
    item.locator("button.delete").click()
    browser_page.locator("#schedule-empty").wait_for()
    assert plans(browser_page) == []


def test_a_one_off_schedule_keeps_the_wall_time_in_its_own_time_zone(browser_page, user):
    log_in(browser_page, user)
    browser_page.goto("/schedules/")

    submit_plan(
        browser_page,
        "New year call",
        "Remind me to call home.",
        frequency="once",
        timeZone="America/New_York",
        runAt="2099-01-01T09:00",
    )

    browser_page.locator(".schedule", has_text="New year call").wait_for()
    [plan] = plans(browser_page)
    assert plan["schedule"]["timeZone"] == "America/New_York"
    assert plan["nextRunAt"].startswith("2099-01-01T14:00:00")


def test_a_schedule_the_api_refuses_shows_why_and_saves_nothing(browser_page, user):
    log_in(browser_page, user)
    browser_page.goto("/schedules/")

    submit_plan(browser_page, "Broken", "Never runs.", frequency="cron", cron="not a cron")

    browser_page.locator("#schedule-error").wait_for()
    assert browser_page.get_attribute("#schedule-form [name=cron]", "aria-invalid") == "true"  # marked beside it
    assert plans(browser_page) == []


def test_starting_a_task_again_after_its_answer_was_lost_starts_it_once(browser_page, user):
    log_in(browser_page, user)
    browser_page.goto("/tasks/new/")
    browser_page.fill("#message-text", "sort the photos")

    def lose_the_answer(route):
        route.fetch()  # the server starts the task; its answer never reaches the page
        route.abort()

    browser_page.route("**/api/v1/tasks", lose_the_answer, times=1)
    browser_page.click("#send")
    browser_page.locator("#task-error").wait_for()

    browser_page.click("#send")

    browser_page.wait_for_url("**/tasks/*-*/")
    tasks = browser_page.evaluate("() => fetch('/api/v1/tasks').then((r) => r.json())")["tasks"]
    assert [task["title"] for task in tasks] == ["sort the photos"]
    assert "sort the photos" not in browser_page.evaluate("() => JSON.stringify(localStorage)")
