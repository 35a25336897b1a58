"""Notifications in headless Chromium: the page's service worker, its "Notify me" control, no push while the page is
in view and one once it is hidden, a delivered push shown and clicked through to the message, and an approval's
Approve clicked on its notification, which decides it without a page while the run goes on to the tool's output.

What Chromium cannot do here: subscribe at a real push service (it would ask Google's, and there is no network). So
the page's `pushManager.subscribe` answers with a subscription of the suite's own push service
(devtools/push_service.py), with keys made as a browser makes them; everything after that is real: the page
posts it, the server encrypts and signs each push to it, the push service checks and decrypts it, and the decrypted
message is handed to the page's service worker through the DevTools protocol (`ServiceWorker.deliverPushMessage`),
as a browser hands it over.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from devtools.push_service import PushService, vapid_public_key_of
from devtools.stack import free_port, wait_until
from runtime.models import Notification
from tests.web.conftest import last_assistant, log_in, send, send_and_wait

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


# A click on one of the approval notification's actions, dispatched to the worker's own handler (a click on a
# notification cannot be made from the protocol). A script's event cannot extend the worker's life as the browser's
# does (`waitUntil` refuses it), so the promises the handler hands over are kept and awaited, as the browser would.
# The notification first shown is kept for later clicks: a click closes it.
CLICK_AN_ACTION = """async (action) => {
  self.clickedNotification = self.clickedNotification || (await self.registration.getNotifications())[0];
  const click = new NotificationEvent("notificationclick", { notification: self.clickedNotification, action });
  const extended = [];
  click.waitUntil = (promise) => extended.push(promise);
  self.dispatchEvent(click);
  await Promise.all(extended);
}"""


def signed_in_with_push(site, user, browser_state):
    """A browser context allowed to notify, whose push manager subscribes at the suite's push service, signed in."""
    context = site.browser.new_context(base_url=site.base_url, viewport={"width": 1280, "height": 800})
    context.grant_permissions(["notifications"], origin=site.base_url)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.add_init_script(f"({FAKE_PUSH_MANAGER})({json.dumps(browser_state.to_json())})")
    log_in(page, user)
    return context, page


def shown_notifications(page, what: str) -> list[dict]:
    """The service worker's notifications once there are any, polled: the worker shows them in its own time."""
    return wait_until(
        lambda: page.evaluate(
            """() => navigator.serviceWorker.ready
                 .then((r) => r.getNotifications())
                 .then((all) => all.map((n) => ({title: n.title, body: n.body, data: n.data,
                                                 actions: n.actions.map((a) => a.action)})))"""
        ),
        timeout=60,
        what=what,
    )


def delivered_and_shown(site, context, page, payload: dict) -> list[dict]:
    """The decrypted message handed to the page's service worker as the browser hands it over; what it shows."""
    cdp = context.new_cdp_session(page)
    registrations = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
    cdp.send("ServiceWorker.enable")
    # Playwright's sync API delivers the protocol's events while it waits in one of its own calls, not in a sleep.
    wait_until(lambda: page.wait_for_timeout(50) or registrations, timeout=10, what="the service worker's registration")
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": site.base_url, "registrationId": registrations[0]["registrationId"], "data": json.dumps(payload)},
    )
    return shown_notifications(page, "the notification to be shown")


# Long because it is one journey whose steps need the ones before: subscribe, a reply in view (not pushed), one
# while hidden (pushed), the push shown by the service worker, and its click landing on the message.
def test_notify_me_subscribes_and_a_push_while_hidden_is_shown_and_opens_the_message(push_site, user):
    site, push_service = push_site
    browser_state = push_service.subscribe()
    context, page = signed_in_with_push(site, user, browser_state)

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
    shown = delivered_and_shown(site, context, page, accepted.payload)
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


def test_approve_on_an_approval_notification_decides_it_without_a_page_and_the_run_goes_on(
    save_note_needs_approval, push_site, user
):
    site, push_service = push_site
    browser_state = push_service.subscribe()
    context, page = signed_in_with_push(site, user, browser_state)
    page.locator(".notify > summary").click()
    page.locator("#notify-toggle").click()
    expect(page.locator("#notify-toggle")).to_have_attribute("data-state", "on")
    set_visibility(page, "hidden")
    send(page, '/tool save_note {"text": "buy milk"}')
    reply = last_assistant(page)
    expect(reply.locator(".approval-approve")).to_be_visible()
    wait_until(lambda: push_service.accepted_for(browser_state), timeout=60, what="the approval push")
    [accepted] = push_service.accepted_for(browser_state)

    [shown] = delivered_and_shown(site, context, page, accepted.payload)
    assert (shown["body"], shown["actions"]) == ("save_note is waiting for your approval.", ["approve", "deny"])
    [worker] = context.service_workers
    worker.evaluate(CLICK_AN_ACTION, "approve")

    expect(reply.locator(".status-completed")).to_be_visible(timeout=90_000)
    expect(reply.locator(".text")).to_contain_text('Tool save_note returned: {"noteId":')
    expect(reply.locator(".tool")).to_have_attribute("data-state", "completed")
    assert len(context.pages) == 1
    follow_up = shown_notifications(page, "the follow-up notification")
    assert [(each["title"], each["body"], each["actions"]) for each in follow_up] == [("Approved", "Main Chat", [])]
    # Deny on the same notification afterwards (another device's copy of it, say): its capability is void.
    worker.evaluate(CLICK_AN_ACTION, "deny")
    wait_until(
        lambda: [each["title"] for each in shown_notifications(page, "a notification")] == ["Already decided"],
        timeout=60,
        what="the follow-up to say the approval was already decided",
    )
    expect(reply.locator(".tool")).to_have_attribute("data-state", "completed")
    context.close()
