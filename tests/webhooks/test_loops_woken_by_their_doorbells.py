"""The webhooks loop and its push sender are told of new work right after it commits (core/doorbells.py): with a
poll of an hour, a finished run's push and its webhook still arrive within seconds, from real processes."""

import uuid

import pytest

from devtools.push_service import PushService, vapid_public_key_of
from devtools.stack import free_port, wait_until
from runtime.models import RunState
from tests.client import finished_run, post_message
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_delivery_by_processes import subscribe as subscribe_webhook
from tests.webhooks.test_push_notifications_by_processes import subscribe as subscribe_browser

AN_HOUR = 3600


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    """The push service and the receiver listen on loopback over plain http, allowed as in the stack's processes."""
    settings.IMPO_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True


def test_a_finished_run_is_pushed_and_posted_without_waiting_for_the_poll(stack, api, settings):
    settings.IMPO_VAPID_PRIVATE_KEY = stack.env["IMPO_VAPID_PRIVATE_KEY"]
    push_service = PushService(free_port(), vapid_public_key_of(stack.env["IMPO_VAPID_PRIVATE_KEY"])).start()
    receiver = Receiver(free_port()).start()
    try:
        browser = push_service.subscribe()
        subscribe_browser(api, browser)
        subscribe_webhook(api, receiver.url)
        stack.start_worker()
        loop = stack.start_webhooks(interval=AN_HOUR)
        # Its first passes (at its start) are over before the run below exists; the next poll is an hour away.
        wait_until(lambda: "loop started" in loop.log_text(), timeout=60, what="the webhooks loop's start")

        run = finished_run(post_message(api, "ring me", client_message_id=str(uuid.uuid4()))["submissionId"])

        assert run.state == RunState.COMPLETED
        wait_until(lambda: push_service.accepted_for(browser), timeout=30, what="the push")
        wait_until(lambda: receiver.received, timeout=30, what="the webhook")
        assert receiver.received[0].json()["data"]["runId"] == str(run.id)
    finally:
        receiver.stop()
        push_service.stop()
