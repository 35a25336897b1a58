"""Takes the README's screenshots (not part of the suite): `pytest tests/web/screenshots.py`.

Each page at a laptop's and a phone's width, in the light and the dark theme, at 1x, into docs/screenshots/.
"""

from pathlib import Path

from tests.web.conftest import WIDTHS, last_assistant, log_in, send_and_wait, start_task, submit_plan

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
