"""Notifications in headless Chromium: the page's service worker, its "Notify me" control, no push while the page is
in view and one once it is hidden, and a delivered push shown and clicked through to the message.

What Chromium cannot do here: subscribe at a real push service (it would ask Google's, and there is no network). So
the page's `pushManager.subscribe` answers with a subscription of the suite's own push service
(impo/devtools/push_service.py), with keys made as a browser makes them; everything after that is real: the page
posts it, the server encrypts and signs each push to it, the push service checks and decrypts it, and the decrypted
message is handed to the page's service worker through the DevTools protocol (`ServiceWorker.deliverPushMessage`),
as a browser hands it over.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from impo.devstack import free_port, wait_until
from impo.devtools.push_service import PushService, vapid_public_key_of
from runtime.models import Notification
from tests.web.conftest import log_in, send_and_wait

# The browser's side of the subscription, as `pushManager.subscribe` would have made it.
FAKE_PUSH_MANAGER = """
(subscription) => {
  let current = null;
  const made = () => ({
    endpoint: subscription.endpoint,
    expirationTime: null,
    toJSON: () => subscription,
    unsubscribe: async () => { current = null; return true; },
  });
  PushManager.prototype.subscribe = async function () { current = made(); return current; };
  PushManager.prototype.getSubscription = async function () { return current; };
}
"""


@pytest.fixture
def push_site(stack, settings, site):
    settings.IMPO_VAPID_PRIVATE_KEY = stack.env["IMPO_VAPID_PRIVATE_KEY"]
    stack.start_webhooks()
    service = PushService(free_port(), vapid_public_key_of(stack.env["IMPO_VAPID_PRIVATE_KEY"])).start()
    yield site, service
    service.stop()


def dispatched(message_id: str) -> bool:
    """Whether the sender took the reply's notification; read on a thread of its own (Playwright's sync API runs an
    event loop on this one, where Django refuses the ORM)."""

    def read() -> bool:
        try:
            return Notification.objects.filter(
                run__submission__assistant_message_id=message_id, dispatched_at__isnull=False
            ).exists()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(read).result()


def set_visibility(page, state: str) -> None:
    """What the browser does when the tab is hidden or shown again (headless tabs are always `visible`)."""
    page.evaluate(
        """(state) => {
          Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
          document.dispatchEvent(new Event("visibilitychange"));
        }""",
        state,
    )


def test_notify_me_subscribes_and_a_push_while_hidden_is_shown_and_opens_the_message(push_site, user):
    site, push_service = push_site
    browser_state = push_service.subscribe()
    context = site.browser.new_context(base_url=site.base_url, viewport={"width": 1280, "height": 800})
    context.grant_permissions(["notifications"], origin=site.base_url)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.add_init_script(f"({FAKE_PUSH_MANAGER})({json.dumps(browser_state.to_json())})")
    log_in(page, user)

    toggle = page.locator("#notify-toggle")
    page.locator(".notify > summary").click()
    page.wait_for_selector("#notify-toggle[data-state=off]")
    assert toggle.inner_text() == "Notify me"
    toggle.click()
    page.wait_for_selector("#notify-toggle[data-state=on]")
    assert page.locator("#notify-browsers li").inner_text().startswith("This browser")
    assert page.locator(".notify-kinds input").count() == 5
    registration = page.evaluate("() => navigator.serviceWorker.ready.then((r) => r.scope)")
    assert registration == f"{site.base_url}/"

    # In view: the reply finishes with nothing pushed.
    watched_message = send_and_wait(page, "I am watching this one").get_attribute("data-message-id")
    wait_until(lambda: dispatched(watched_message), timeout=30, what="the sender to take the notification")
    # Hidden: the next one is pushed.
    set_visibility(page, "hidden")
    hidden_message = send_and_wait(page, "I looked away").get_attribute("data-message-id")
    wait_until(lambda: push_service.accepted_for(browser_state), timeout=60, what="the push of the hidden page")
    [accepted] = push_service.accepted_for(browser_state)
    assert accepted.payload["messageId"] == hidden_message != watched_message
    set_visibility(page, "visible")

    # The browser hands the decrypted message to the service worker, which shows it.
    cdp = context.new_cdp_session(page)
    registrations = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
    cdp.send("ServiceWorker.enable")
    # Playwright's sync API delivers the protocol's events while it waits in one of its own calls, not in a sleep.
    wait_until(lambda: page.wait_for_timeout(50) or registrations, timeout=10, what="the service worker's registration")
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {
            "origin": site.base_url,
            "registrationId": registrations[0]["registrationId"],
            "data": json.dumps(accepted.payload),
        },
    )
    # Polled from here: the worker shows the notification in its own time after the delivery returns.
    shown = wait_until(
        lambda: page.evaluate(
            """() => navigator.serviceWorker.ready
                 .then((r) => r.getNotifications())
                 .then((all) => all.map((n) => ({title: n.title, body: n.body, data: n.data})))"""
        ),
        timeout=60,
        what="the notification to be shown",
    )
    assert [(each["title"], each["data"]["url"]) for each in shown] == [("Main Chat", f"/#message-{hidden_message}")]
    assert shown[0]["body"] == accepted.payload["body"]

    # The click: the worker's handler (a click on a notification cannot be made from the protocol) takes the tab
    # to the message.
    [worker] = context.service_workers
    worker.evaluate(
        """async () => {
          const [notification] = await self.registration.getNotifications();
          notification.close();
          await openChat(new URL(notification.data.url, self.location.origin));
        }"""
    )
    page.wait_for_function(f"() => location.hash === '#message-{hidden_message}'")
    page.locator(f"[data-message-id='{hidden_message}'].landed").wait_for()
    context.close()


def test_the_service_worker_is_served_from_the_root(push_site):
    site, _ = push_site
    page = site.new_page()

    response = page.goto("/push-worker.js")

    assert response.status == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert "notificationclick" in response.text()
