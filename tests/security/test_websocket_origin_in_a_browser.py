"""The reported attack, replayed in Chromium: a page on another port of the same host opens the victim's
conversation websocket. The browser attaches the session cookie (cookies ignore ports); the server refuses."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.contrib.auth.hashers import make_password

from devtools.stack import start_web
from tests.client import send_message
from tests.factories import PASSWORD
from tests.web.conftest import CHROMIUM, CHROMIUM_FLAGS, log_in

# What the attacker's page does: open the socket, report the first thing that happens to it.
OPEN_SOCKET = """(url) => new Promise((resolve) => {
  const socket = new WebSocket(url);
  socket.onmessage = (event) => resolve("read: " + event.data);
  socket.onclose = () => resolve("closed");
})"""


class _AnyPage(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802  (the http.server hook's name)
        body = b"<!doctype html><title>another port</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def page_on_another_port():
    server = HTTPServer(("127.0.0.1", 0), _AnyPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def signed_in_page(stack, user, api):
    from playwright.sync_api import sync_playwright

    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")  # what the web server's settings verify
    user.save()
    send_message(api, "secret plans", client_message_id="m-1")
    conversation_id = api.get("/api/v1/conversation").json()["conversationId"]
    _, base_url = start_web(stack)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(base_url=base_url)
        page.set_default_timeout(30_000)
        log_in(page, user)
        socket_url = f"{base_url.replace('http://', 'ws://')}/ws/v1/conversations/{conversation_id}/?after=0"
        yield page, socket_url
        browser.close()


def test_a_page_on_another_port_cannot_read_the_conversation_with_the_session_cookie(
    signed_in_page, page_on_another_port
):
    page, socket_url = signed_in_page
    page.goto(page_on_another_port)

    assert page.evaluate(OPEN_SOCKET, socket_url) == "closed"


def test_a_page_of_the_site_itself_reads_the_conversation(signed_in_page):
    page, socket_url = signed_in_page  # on the web chat page, where the login landed

    outcome = page.evaluate(OPEN_SOCKET, socket_url)

    assert outcome.startswith("read: ") and "secret plans" in outcome
