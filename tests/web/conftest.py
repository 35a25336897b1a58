"""The web chat in headless Chromium against the web server, a real worker and the Rebyte double."""

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.hashers import make_password
from playwright.sync_api import expect

from devtools.stack import start_web
from tests.factories import PASSWORD

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # The page plays `play_sound` through Web Audio; a real tab gets this from the user's first click.
    "--autoplay-policy=no-user-gesture-required",
]
JS_MODULES = Path(__file__).resolve().parent.parent / "js" / "node_modules"
# expect() keeps its own deadline (5 s by default), apart from the page's: a loaded machine needs the same 30 s.
expect.set_options(timeout=30_000)


@dataclass
class Site:
    base_url: str
    browser: object

    def new_page(self, **options):
        page = self.browser.new_page(base_url=self.base_url, **options)
        page.set_default_timeout(30_000)
        return page


def _verifiable_password(*users):
    # Playwright's sync API runs an event loop in this thread, where Django refuses ORM calls:
    # everything the test needs from the database (the users) is created before it starts.
    for user in users:
        user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")  # what the web server's settings verify
        user.save()


@pytest.fixture
def site_url(request, transactional_db, shared_stack) -> str:
    """The web server the browser talks to: the shared stack's, unless the test configures a stack of its own (it
    asks for `stack`, as `save_note_needs_approval` does), which then gets a web server and a worker of its own.
    The web server's processes read what the test writes: hence the transactional database."""
    if "stack" not in request.fixturenames:
        return request.getfixturevalue("shared_web")
    stack = request.getfixturevalue("stack")
    worker = stack.start_worker(wait=False)  # boots while the web server does
    _, base_url = start_web(stack)
    stack.wait_ready(worker)
    return base_url


@pytest.fixture
def site(site_url, user, other_user):
    from playwright.sync_api import sync_playwright

    _verifiable_password(user, other_user)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield Site(base_url=site_url, browser=browser)
        browser.close()


@pytest.fixture
def browser_page(site):
    return site.new_page()


def log_in(page, user, *, wait_for_chat=True):
    page.goto("/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    if wait_for_chat:
        page.wait_for_selector("#connection[data-state=live]")


def log_out(page):
    page.click("#logout button")
    page.wait_for_url("**/login/")


def send(page, text):
    page.fill("#message-text", text)
    page.click("#send")


def last_assistant(page):
    return page.locator(".message.role-assistant").last


def history(page) -> dict:
    return page.evaluate("() => fetch('/api/v1/conversation').then((response) => response.json())")


def submit_plan(page, title, goal, *, frequency=None, timeZone=None, **fields):
    """Fills the Scheduled tasks form (selects by value, other fields by text) and saves it."""
    form = "#schedule-form"
    page.fill(f"{form} [name=title]", title)
    page.fill(f"{form} [name=goal]", goal)
    for name, value in (("frequency", frequency), ("timeZone", timeZone)):
        if value:
            page.select_option(f"{form} [name={name}]", value)
    for name, value in fields.items():
        if name == "weekdays":
            for day in value:
                page.check(f"{form} [name=weekdays][value='{day}']")
        else:
            page.fill(f"{form} [name={name}]", value)
    page.click("#schedule-save")


def run_axe(page) -> list[dict]:
    """axe-core's serious and critical violations on the page as it is now."""
    page.add_script_tag(path=str(JS_MODULES / "axe-core" / "axe.min.js"))
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


# The two widths every page is tried at: a laptop and a phone.
WIDTHS = {"wide": {"width": 1280, "height": 800}, "narrow": {"width": 390, "height": 844}}


@pytest.fixture(params=list(WIDTHS))
def sized_page(request, site):
    page = site.new_page(viewport=WIDTHS[request.param])
    page.narrow = request.param == "narrow"
    return page


def open_sidebar(page):
    """The sidebar as a person reaches it: always there when wide, behind Menu (a drawer) when narrow."""
    if page.narrow:
        page.click("#menu-toggle")
    page.locator("#sidebar").wait_for(state="visible")
    return page.locator("#sidebar")


def post_json(page, url, body) -> dict:
    """A JSON POST from the page, with its session and CSRF token, as the page's own scripts make it."""
    return page.evaluate(
        """([url, body]) => ImpoApi.call("POST", url, body)""",
        [url, body],
    )


@pytest.fixture
def save_note_needs_approval(stack):
    """save_note waits for its owner's answer. Listed before the page in a test's arguments, so the web and worker
    processes start with it; the sweeper re-sends a wake-up whose claim skipped a run another transaction held."""
    stack.env["IMPO_TOOL_APPROVAL"] = "save_note=always"
    stack.start_sweeper()


def start_task(page, goal):
    """Starts a task from its empty composer ("+ New task"), as a person does, and waits for its first reply."""
    page.goto("/tasks/new/")
    page.fill("#message-text", goal)
    page.click("#send")
    page.wait_for_url("**/tasks/*-*/")
    last_assistant(page).locator(".status-completed").wait_for()


def send_and_wait(page, text, status="completed"):
    """Sends `text` and waits for its own reply (not the one before it) to reach `status`."""
    replies = page.locator(".message.role-assistant")
    before = replies.count()
    send(page, text)
    replies.nth(before).locator(f".status-{status}").wait_for(timeout=90_000)
    return replies.nth(before)
