"""Takes the attachments' screenshots (not part of the suite): `pytest tests/web/screenshots_of_attachments.py`.

Into docs/screenshots/, each named attachments-<what>.png, at 1x: the previews before sending, an upload's
progress, images and a document in the conversation (laptop and phone), and a refusal.
"""

import io
import re

from PIL import Image
from playwright.sync_api import expect

from tests.web.conftest import WIDTHS, last_assistant, log_in
from tests.web.screenshots import OUT
from tests.web.test_attachments_in_a_browser import attach, attachment_store, drop, noise_png, slow_uploads  # noqa: F401

REPORT = b"Quarterly report\n\nSales rose in every region.\n" * 400


def _sky() -> bytes:
    """A picture with something in it: an evening sky, from a gradient."""
    shade = Image.linear_gradient("L").resize((640, 400))
    bands = (shade.point(lambda v: 40 + v // 2), shade.point(lambda v: 60 + v // 3), shade.point(lambda v: 160))
    sky = Image.merge("RGB", bands)
    out = io.BytesIO()
    sky.save(out, format="PNG")
    return out.getvalue()


def _ready(page, count):
    expect(page.locator(".attach-status", has_text="Ready to send")).to_have_count(count)


def test_take_the_attachments_screenshots(attachment_store, site, user):  # noqa: F811  (the fixture, imported)
    OUT.mkdir(parents=True, exist_ok=True)
    page = site.new_page(viewport=WIDTHS["wide"], color_scheme="light", device_scale_factor=1)
    log_in(page, user)
    attach(page, "balcony.png", "image/png", _sky())
    drop(page, ".composer-area", "quarterly-report.txt", "text/plain", REPORT)
    _ready(page, 2)
    page.fill("#message-text", "What do these two say about the plants?")
    page.screenshot(path=OUT / "attachments-previews.png")

    page.click("#send")
    expect(last_assistant(page).locator(".status-completed")).to_be_attached()
    page.reload()
    expect(page.locator(".message.role-user .file-image img")).to_have_js_property("naturalWidth", 640)
    page.screenshot(path=OUT / "attachments-conversation.png")
    page.locator(".message.role-user .file-image a").click()
    expect(page.get_by_role("dialog").locator("img")).to_have_js_property("naturalWidth", 640)
    page.screenshot(path=OUT / "attachments-image-opened.png")
    page.keyboard.press("Escape")

    attach(page, "photo.heic", "image/heic", b"not offered")
    expect(page.locator("#attach-error")).to_be_visible()
    page.screenshot(path=OUT / "attachments-refusal.png")

    phone = site.new_page(viewport=WIDTHS["narrow"], color_scheme="dark", device_scale_factor=1)
    log_in(phone, user)
    expect(phone.locator(".message.role-user .file-document a")).to_be_visible()
    phone.screenshot(path=OUT / "attachments-document-phone.png")
    slow_uploads(phone)
    attach(phone, "garden.png", "image/png", noise_png(420))
    bar = phone.get_by_role("progressbar")
    expect(bar).to_have_attribute("aria-valuenow", re.compile(r"^[3-9][0-9]$"))
    phone.screenshot(path=OUT / "attachments-progress-phone.png")
