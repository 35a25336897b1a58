"""Try again, words instead of codes, form errors beside their fields, and the keyboard: focus,
Escape and one announcement per reply; at a laptop's and a phone's width."""

from tests.web.conftest import history, last_assistant, log_in, send, submit_plan

SAVE_MILK = '/tool save_note {"text": "buy milk"}'


def active_id(page) -> str:
    return page.evaluate("() => document.activeElement.id")


def test_try_again_on_a_failed_reply_then_a_normal_message_completes(sized_page, user):
    page = sized_page
    log_in(page, user)
    send(page, "/busy the service is swamped")  # a passing failure (server_overloaded): retryable
    reply = last_assistant(page)
    reply.locator(".status-failed").wait_for(timeout=90_000)
    problem = reply.locator(".run-error")
    assert (
        problem.locator(".error-sentence").inner_text() == "The assistant's service is overloaded just now. Try again."
    )
    assert problem.locator(".error-details code").is_hidden()  # the code only behind Details
    problem.locator(".error-details summary").click()
    assert problem.locator(".error-details code").inner_text().startswith("server_overloaded")

    reply.locator("button.try-again").click()
    reply.locator(".status-failed").wait_for(state="detached")  # queued again, the same reply
    reply.locator(".status-failed").wait_for(timeout=90_000)  # /busy fails every attempt
    assert active_id(page) == "message-text"
    submission_id = history(page)["messages"][-1]["submissionId"]
    attempt = page.evaluate(f"() => fetch('/api/v1/submissions/{submission_id}').then((r) => r.json())")
    assert attempt["status"] == "failed"

    send(page, "and now something normal")
    last_assistant(page).locator(".status-completed").wait_for()
    assert last_assistant(page).locator(".text").inner_text() == "Echo: and now something normal"
    assert page.locator(".message.role-assistant").count() == 2  # the retry reused its reply


def test_every_refused_schedule_field_is_marked_beside_itself_in_words(sized_page, user):
    page = sized_page
    log_in(page, user)
    page.goto("/schedules/")

    submit_plan(page, " ", "Never runs.", frequency="cron", cron="not a cron")

    form = page.locator("#schedule-form")
    form.locator(".field-error").nth(1).wait_for()
    title, cron = form.locator("[name=title]"), form.locator("[name=cron]")
    assert title.get_attribute("aria-invalid") == cron.get_attribute("aria-invalid") == "true"
    assert page.locator(f"#{title.get_attribute('aria-describedby')}").inner_text() == "Fill this in."
    assert page.locator(f"#{cron.get_attribute('aria-describedby')}").inner_text().startswith("This must have exactly")
    summary = page.locator("#schedule-error .error-sentence").inner_text()
    assert summary == "Something in the form needs fixing; see the marked fields."
    assert "schedule.cron" not in summary + "".join(form.locator(".field-error").all_inner_texts())
    assert page.evaluate("() => document.activeElement.name") == "title"  # the first marked field


def test_a_task_without_a_goal_is_refused_beside_its_field(sized_page, user):
    page = sized_page
    log_in(page, user)
    page.goto("/tasks/new/")

    page.click("#send")

    assert page.locator("#task-error").inner_text() == "Describe the task first: what should the assistant do?"
    assert page.get_attribute("#message-text", "aria-invalid") == "true"
    assert active_id(page) == "message-text"


def test_the_send_choice_closes_with_escape_or_cancel_and_focus_returns_to_the_composer(
    sized_page, user, rebyte_double
):
    page = sized_page
    rebyte_double.configure(delta_delay_ms=100)  # /slow: a second a character
    log_in(page, user)
    send(page, "/slow a reply that takes its time")
    last_assistant(page).locator(".status-running").wait_for()

    page.fill("#message-text", "one more thing")
    page.keyboard.press("Enter")
    page.locator("#send-choice").wait_for()
    assert page.evaluate("() => document.activeElement.dataset.policy") == "queue"
    page.keyboard.press("Escape")
    page.locator("#send-choice").wait_for(state="hidden")
    assert active_id(page) == "message-text" and page.input_value("#message-text") == "one more thing"

    page.keyboard.press("Enter")
    page.click("#send-choice-cancel")
    assert active_id(page) == "message-text"

    page.keyboard.press("Enter")
    page.click("#send-choice [data-policy=queue]")
    assert active_id(page) == "message-text"
    page.locator(".message.role-assistant", has_text="Echo: one more thing").wait_for(timeout=90_000)


def test_one_polite_region_reads_each_finished_reply_once_not_its_chunks(site, user, rebyte_double):
    page = site.new_page()
    rebyte_double.configure(delta_delay_ms=30)
    log_in(page, user)
    assert page.locator("#messages").get_attribute("aria-live") is None
    page.evaluate(
        """() => {
            window.announcements = [];
            new MutationObserver(() => announcements.push(document.getElementById("announcer").textContent))
                .observe(document.getElementById("announcer"), {childList: true, characterData: true, subtree: true});
        }"""
    )

    send(page, "/slow streamed slowly")
    last_assistant(page).locator(".status-completed").wait_for()

    page.wait_for_function("() => announcements.length > 0")
    assert page.evaluate("() => announcements") == ["Assistant replied: Echo: streamed slowly"]
    assert page.get_attribute("#announcer", "aria-live") == "polite"


def test_an_approval_says_waiting_once_deny_looks_secondary_and_focus_returns_after_the_answer(
    save_note_needs_approval, sized_page, user
):
    page = sized_page
    log_in(page, user)
    send(page, SAVE_MILK)
    reply = last_assistant(page)
    reply.locator(".approval-approve").wait_for()

    on_screen = "(node) => !node.closest('.visually-hidden')"  # screen readers hear the badge, people do not see it
    said = [node.inner_text() for node in reply.locator(".tool-state, .status").all() if node.evaluate(on_screen)]
    assert said.count("Waiting for your approval") == 1
    approve_colour, deny_colour = (
        reply.locator(selector).evaluate("(b) => getComputedStyle(b).backgroundColor")
        for selector in (".approval-approve", ".approval-deny")
    )
    assert approve_colour != deny_colour

    reply.locator(".approval-deny").click()
    reply.locator(".approval-confirm-deny").click()
    reply.locator(".status-completed").wait_for()
    assert active_id(page) == "message-text"
