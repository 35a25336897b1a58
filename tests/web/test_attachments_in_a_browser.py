"""Files in the web chat (docs/design.md §12): attached by the button, by dropping and by pasting, each uploaded with a
progress bar and shown as a preview; sent with the message and shown in it, still there after a reload; refused in
plain words, by the page before anything is sent and by the server after."""

import base64
import io
import os
import re

import pytest
from PIL import Image
from playwright.sync_api import expect

from tests.attachments.files import EXECUTABLE, png
from tests.web.conftest import WIDTHS, last_assistant, log_in, run_axe

# Slow enough for the bar to be seen, and faster than the local store's lowest rate (64 KiB/s) by far.
UPLOAD_BYTES_PER_SECOND = 160 * 1024


@pytest.fixture
def attachment_store(stack, tmp_path):
    """Listed before the page: the test's web server and worker keep files in a directory of the test's own."""
    stack.env["IMPO_ATTACHMENT_DIR"] = str(tmp_path / "attachments")
    return tmp_path / "attachments"


def noise_png(side: int) -> bytes:
    """A PNG that does not compress: about 3 bytes a pixel."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format="PNG")
    return out.getvalue()


def slow_uploads(page):
    """The browser's own network throttling: the upload's progress events come as they would on a slow link."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    conditions = {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": UPLOAD_BYTES_PER_SECOND}
    cdp.send("Network.emulateNetworkConditions", conditions)
    return cdp


def attach(page, name, mime_type, data):
    page.set_input_files("#attach-input", files=[{"name": name, "mimeType": mime_type, "buffer": data}])


def drop(page, selector, name, mime_type, data):
    """A drop as the browser dispatches it: a DataTransfer holding the file, built in the page."""
    transfer = page.evaluate_handle(
        """([name, type, encoded]) => {
          const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
          const transfer = new DataTransfer();
          transfer.items.add(new File([bytes], name, { type }));
          return transfer;
        }""",
        [name, mime_type, base64.b64encode(data).decode()],
    )
    page.dispatch_event(selector, "dragover", {"dataTransfer": transfer})
    page.dispatch_event(selector, "drop", {"dataTransfer": transfer})


def paste(page, name, mime_type, data):
    """A paste as a screenshot tool leaves it: a clipboard holding an image and no text."""
    page.evaluate(
        """([name, type, encoded]) => {
          const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
          const transfer = new DataTransfer();
          transfer.items.add(new File([bytes], name, { type }));
          const event = new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true });
          document.getElementById("message-text").dispatchEvent(event);
        }""",
        [name, mime_type, base64.b64encode(data).decode()],
    )


@pytest.mark.parametrize("width", list(WIDTHS))
def test_a_picked_image_uploads_with_a_progress_bar_and_goes_with_the_message(attachment_store, site, user, width):
    page = site.new_page(viewport=WIDTHS[width])
    log_in(page, user)
    slow_uploads(page)
    attach(page, "holiday.png", "image/png", noise_png(400))

    preview = page.locator(".attach-item")
    expect(preview.locator("img.attach-thumb")).to_have_attribute("src", re.compile(r"^blob:"))
    bar = preview.get_by_role("progressbar", name="Uploading holiday.png")
    expect(bar).to_have_attribute("aria-valuenow", re.compile(r"^[1-9][0-9]?$"))  # started, not finished
    expect(page.locator("#send")).to_be_disabled()
    expect(preview.locator(".attach-status")).to_have_text("Ready to send")
    expect(page.locator("#send")).to_be_enabled()

    page.fill("#message-text", "Where was this?")
    page.click("#send")
    expect(last_assistant(page).locator(".status-completed")).to_be_attached()
    expect(page.locator(".attach-item")).to_have_count(0)
    thumbnail = page.locator(".message.role-user .file-image img")
    expect(thumbnail).to_have_attribute("alt", "holiday.png")

    page.reload()
    thumbnail = page.locator(".message.role-user .file-image img")
    expect(thumbnail).to_have_attribute("src", re.compile(r"^/api/v1/files/upload_[0-9a-f-]{36}$"))
    expect(thumbnail).to_have_js_property("naturalWidth", 400)  # the bytes came back, and are an image
    assert run_axe(page) == []
    page.locator(".message.role-user .file-image a").click()
    viewer = page.get_by_role("dialog", name="holiday.png")
    expect(viewer.locator("img")).to_have_js_property("naturalWidth", 400)
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()


def test_a_dropped_document_and_a_pasted_image_go_as_a_message_without_text(attachment_store, site, user):
    page = site.new_page(viewport=WIDTHS["narrow"])
    log_in(page, user)
    notes = b"milk\nphoto paper\n" * 200
    drop(page, ".composer-area", "shopping.txt", "text/plain", notes)
    paste(page, "image.png", "image/png", png())

    document = page.locator(".attach-item", has_text="shopping.txt")
    expect(document.locator(".file-size")).to_have_text("3.3 KB")
    expect(page.locator(".attach-item", has_text="image.png").locator("img.attach-thumb")).to_be_visible()
    expect(page.locator(".attach-status", has_text="Ready to send")).to_have_count(2)
    assert run_axe(page) == []
    page.click("#send")  # no text: the files are the message

    expect(last_assistant(page).locator(".status-completed")).to_be_attached()
    page.reload()
    chip = page.locator(".message.role-user .file-document a")
    expect(chip).to_contain_text("shopping.txt")
    expect(chip.locator(".file-size")).to_have_text("3.3 KB")
    expect(chip).to_have_attribute("download", "shopping.txt")
    expect(page.locator(".message.role-user .file-image img")).to_have_attribute("alt", "image.png")
    with page.expect_download() as download:
        chip.click()
    assert download.value.path().read_bytes() == notes


def test_refusals_are_said_in_plain_words_and_a_refused_file_keeps_send_off(attachment_store, site, user):
    page = site.new_page()
    log_in(page, user)
    attach(page, "film.mp4", "video/mp4", b"not a film")
    expect(page.locator("#attach-error")).to_have_text("film.mp4: Impo can't open this kind of file.")
    attach(page, "scan.pdf", "application/pdf", b"%PDF" + bytes(10 * 1024 * 1024))
    expect(page.locator("#attach-error")).to_have_text("scan.pdf: This file is larger than 10 MB.")
    expect(page.locator(".attach-item")).to_have_count(0)  # refused before any byte went

    attach(page, "photo.png", "image/png", EXECUTABLE)  # its name says image; the server reads what it is
    refused = page.locator(".attach-item", has_text="Impo couldn't read this file")
    expect(refused).to_contain_text("it may be damaged, or not the kind of file its name says.")
    expect(refused).not_to_contain_text("attachment_unreadable")
    page.fill("#message-text", "and this")
    expect(page.locator("#send")).to_be_disabled()
    refused.get_by_role("button", name="Remove photo.png").click()
    expect(page.locator(".attach-item")).to_have_count(0)
    expect(page.locator("#send")).to_be_enabled()


def test_an_upload_cut_off_is_prepared_again_with_the_same_id_and_stored_once(attachment_store, site, user):
    page = site.new_page()
    log_in(page, user)
    prepared = []
    page.on(
        "request",
        lambda request: prepared.append(request.post_data_json["id"]) if request.url.endswith("/prepare") else None,
    )
    cut = []

    def cut_the_first_upload(route):
        if not cut:
            cut.append(route.request.url)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route(re.compile(r"/api/v1/attachments/[^/]+/upload\?ticket="), cut_the_first_upload)
    attach(page, "receipt.png", "image/png", png(120, 80))
    expect(page.locator(".attach-status")).to_have_text("Ready to send")

    assert len(cut) == 1 and len(prepared) == 2 and prepared[0] == prepared[1]
    stored = [path for path in attachment_store.rglob("*") if path.is_file()]
    assert len(stored) == 1
    answer = page.evaluate("(id) => fetch(`/api/v1/files/upload_${id}`).then((r) => r.status)", prepared[0])
    assert answer == 200
