"""Takes the README's screenshots (not part of the suite): `pytest tests/web/screenshots.py`.

Each page at a laptop's and a phone's width, in the light and the dark theme, at 1x, into docs/screenshots/.
"""

import json
from pathlib import Path

from tests.web.conftest import WIDTHS, last_assistant, log_in, send, send_and_wait, start_task, submit_plan
from tests.web.test_notifications_in_a_browser import FAKE_PUSH_MANAGER, push_site  # noqa: F401  (a fixture)

OUT = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"
PAGES = ("chat", "tasks", "schedules", "login", "not-found")


def _fill(page, user):
    """Something worth seeing on each page: a reply with code, a failed reply, a task, a schedule."""
    log_in(page, user)
    send_and_wait(page, "Show me a loop in Python.")
    send_and_wait(
        page, "Here is one:\n```python\nfor n in range(3):\n    print(n)  # 0, 1, 2\n```\n- short\n- and sweet"
    )
    send_and_wait(page, "/fail the model fell over", "failed")
    start_task(page, "Sort the holiday photos by place")
    page.goto("/schedules/")
    submit_plan(page, "Morning digest", "Summarise my notes from yesterday.")
    page.locator(".schedule").wait_for()


def test_take_the_screenshots(site, user):
    OUT.mkdir(parents=True, exist_ok=True)
    _fill(site.new_page(), user)
    for width, viewport in WIDTHS.items():
        for theme in ("light", "dark"):
            page = site.new_page(viewport=viewport, color_scheme=theme, device_scale_factor=1)
            page.goto("/login/")
            page.screenshot(path=OUT / f"login-{width}-{theme}.png")
            log_in(page, user)
            last_assistant(page).locator(".status-failed").wait_for(timeout=90_000)
            page.screenshot(path=OUT / f"chat-{width}-{theme}.png")
            page.goto("/tasks/")
            page.locator("#side-chats li").first.wait_for(state="attached")
            page.screenshot(path=OUT / f"tasks-{width}-{theme}.png")
            page.goto("/schedules/")
            page.locator(".schedule").wait_for()
            page.screenshot(path=OUT / f"schedules-{width}-{theme}.png")
            page.goto("/no-such-page/")
            page.screenshot(path=OUT / f"not-found-{width}-{theme}.png")
            page.close()


def test_take_the_chats_and_cards_screenshots(save_note_needs_approval, site, user):
    """The sidebar searching the chats, tool and approval cards and a failure's words, wide, phone and dark."""
    OUT.mkdir(parents=True, exist_ok=True)
    page = site.new_page()
    log_in(page, user)
    start_task(page, "Water the plants on the balcony")
    start_task(page, "Sort the holiday photos by place")
    page.goto("/")
    page.wait_for_selector("#connection[data-state=live]")
    send_and_wait(page, '/tool current_time {"timeZone": "Europe/Paris"}')
    send_and_wait(page, "/busy", "failed")
    send(page, '/tool save_note {"text": "buy milk and photo paper"}')
    last_assistant(page).locator(".approval-approve").wait_for()
    for width, viewport in WIDTHS.items():
        for theme in ("light", "dark"):
            shot = site.new_page(viewport=viewport, color_scheme=theme, device_scale_factor=1)
            log_in(shot, user)
            last_assistant(shot).locator(".approval-approve").wait_for()
            shot.locator(".role-assistant .tool").first.locator("summary").first.click()
            shot.screenshot(path=OUT / f"cards-{width}-{theme}.png")
            if width == "narrow":
                shot.click("#menu-toggle")
            shot.fill("#side-search", "photo")
            shot.locator(".side-task-title", has_text="Water").wait_for(state="detached")
            shot.screenshot(path=OUT / f"chats-search-{width}-{theme}.png")
            shot.close()


def test_take_the_progress_line_screenshot(site, user, rebyte_double):
    """A reply's "thinking / doing" line, opened, while the double reasons slowly before it answers (wide)."""
    OUT.mkdir(parents=True, exist_ok=True)
    rebyte_double.configure(reasoning_summaries=True)
    page = site.new_page(viewport=WIDTHS["wide"], color_scheme="light", device_scale_factor=1)
    log_in(page, user)
    send_and_wait(page, "Show me a loop in Python.")
    rebyte_double.configure(delta_delay_ms=2500)  # the summary's four pieces take ten seconds, then a pause
    send(page, "What should I pack for a weekend in the mountains?")
    line = last_assistant(page).locator(".progress-line")
    line.locator("summary", has_text="Thinking: Reading the message").wait_for()
    line.locator("summary").click()
    # Its whole thought, in the pause before the reply's first words.
    last_assistant(page).locator(".progress-detail", has_text="as the script asks").wait_for()
    page.screenshot(path=OUT / "progress-line.png")


def test_take_the_regenerated_reply_screenshots(rebyte_double, site, user):
    """A reply regenerated after the provider refused the first version: "2 / 2", wide, phone and dark."""
    OUT.mkdir(parents=True, exist_ok=True)
    page = site.new_page()
    log_in(page, user)
    send_and_wait(page, "Suggest a name for a grey cat.")
    rebyte_double.fault("input_message", "http_error", status=400)  # the session's next input is refused
    send_and_wait(page, "And one for a ginger cat?", "failed").locator("button.regenerate").click()
    page.locator(".message.role-assistant").nth(2).locator(".status-completed").wait_for(timeout=90_000)
    for width, viewport in WIDTHS.items():
        for theme in ("light", "dark"):
            shot = site.new_page(viewport=viewport, color_scheme=theme, device_scale_factor=1)
            log_in(shot, user)
            shot.locator(".message.role-assistant:visible .attempt-position", has_text="2 / 2").wait_for()
            shot.screenshot(path=OUT / f"regenerated-reply-{width}-{theme}.png")
            shot.close()


def test_take_the_notify_control_screenshot(push_site, user):  # noqa: F811  (the fixture imported above)
    """The "Notify me" control switched on, at a laptop's width (docs/notifications.md)."""
    site, push_service = push_site
    context = site.browser.new_context(base_url=site.base_url, viewport={"width": 1280, "height": 800})
    context.grant_permissions(["notifications"], origin=site.base_url)
    page = context.new_page()
    page.add_init_script(f"({FAKE_PUSH_MANAGER})({json.dumps(push_service.subscribe().to_json())})")
    log_in(page, user)
    page.locator(".notify > summary").click()
    page.locator("#notify-toggle").click()
    page.wait_for_selector("#notify-toggle[data-state=on]")
    page.screenshot(path=OUT / "notify-control-laptop-light.png")
