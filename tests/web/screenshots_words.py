"""Takes the screenshots of the new task composer, the outage and failure words and "Thought for N s" (not part of
the suite): `SHOTS_STAGE=after pytest tests/web/screenshots_words.py` (`before` on the commit before them), at a
laptop's and a phone's width, light theme, 1x, into docs/screenshots/."""

import os
from pathlib import Path

from tests.web.conftest import WIDTHS, last_assistant, log_in, open_sidebar, send, send_and_wait

OUT = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"
STAGE = os.environ.get("SHOTS_STAGE", "after")


def _page(site, width):
    page = site.new_page(viewport=WIDTHS[width], color_scheme="light", device_scale_factor=1)
    page.narrow = width == "narrow"
    return page


def test_new_task(site, user):
    for width in WIDTHS:
        page = _page(site, width)
        log_in(page, user)
        open_sidebar(page).locator(".new-chat").click()
        page.locator("textarea").first.wait_for()
        page.screenshot(path=OUT / f"new-task-{STAGE}-{width}.png")


def test_outage_and_failure_words(site, user, rebyte_double):
    for width in WIDTHS:
        page = _page(site, width)
        log_in(page, user)
        send(page, f"/busy the service is swamped ({width})")
        last_assistant(page).locator(".status-failed").wait_for(timeout=90_000)
        if STAGE == "after":
            last_assistant(page).locator("button.try-again").click()
            last_assistant(page).locator(".error-sentence", has_text="failed again").wait_for(timeout=90_000)
        page.screenshot(path=OUT / f"outage-words-{STAGE}-{width}.png")
        if STAGE == "after":
            rebyte_double.fault("*", "http_error", status=503, seconds=5)
            send(page, "during the outage")
            last_assistant(page).locator(".status", has_text="Reconnecting to the agent…").wait_for()
            page.screenshot(path=OUT / f"outage-words-reconnecting-{width}.png")
            last_assistant(page).locator(".status-completed").wait_for(timeout=90_000)


def test_thought_for(site, user, rebyte_double):
    rebyte_double.configure(reasoning_summaries=True)
    for width in WIDTHS:
        page = _page(site, width)
        log_in(page, user)
        send_and_wait(page, f"warm up ({width})")
        send_and_wait(page, "think it over")
        page.reload()
        page.wait_for_selector("#connection[data-state=live]")
        if STAGE == "after":
            last_assistant(page).locator("details.reasoning summary").click()
        page.screenshot(path=OUT / f"thought-for-{STAGE}-{width}.png")
