"""Takes the screenshots of the account page's custom instructions (not part of the suite):
`pytest tests/web/screenshots_instructions.py`, at a laptop's and a phone's width, light theme, 1x, into
docs/screenshots/ (`custom-instructions-wide.png`, `custom-instructions-narrow.png`)."""

from pathlib import Path

from playwright.sync_api import expect

from tests.web.conftest import WIDTHS, log_in

OUT = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"


def test_custom_instructions(site, user):
    for width, viewport in WIDTHS.items():
        page = site.new_page(viewport=viewport, color_scheme="light", device_scale_factor=1)
        log_in(page, user)
        page.goto("/account/")
        text = page.get_by_label("Your instructions to the agent")
        expect(text).to_be_enabled()
        save = page.get_by_role("button", name="Save instructions")
        if text.input_value():  # each width shows the save itself: the one before saved them already
            text.fill("")
            save.click()
            expect(page.locator("#instructions-status")).to_contain_text("Saved: no instructions")
        text.fill("Answer in French, briefly.\nI work on a Django backend: show Python examples first.")
        save.click()
        expect(page.locator("#instructions-status")).to_have_text("Saved. They apply from your next message.")
        page.locator("section.card").screenshot(path=OUT / f"custom-instructions-{width}.png")
