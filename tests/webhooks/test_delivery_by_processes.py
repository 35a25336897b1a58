"""Webhooks delivered by real worker and webhooks-loop processes to a real HTTP receiver."""

import time

import pytest

from devtools.stack import free_port, wait_until
from runtime.models import RunState
from tests.client import finished_run, post_message
from tests.webhooks.receiver import Receiver
from webhooks.models import DeliveryStatus, WebhookDelivery

# Three times the stack's webhook backoff cap (4 s, devtools/stack.py): the retries reach the cap during the outage.
RECEIVER_DOWN_SECONDS = 12


@pytest.fixture(autouse=True)
def loopback_receivers_allowed(settings):
    """The receivers listen on loopback over plain http: allowed explicitly here, as in the stack's processes."""
    settings.IMPO_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True


@pytest.fixture
def receivers():
    started: list[Receiver] = []

    def make(statuses=(204,), *, start=True) -> Receiver:
        receiver = Receiver(free_port(), statuses)
        started.append(receiver)
        return receiver.start() if start else receiver

    yield make
    for receiver in started:
        receiver.stop()


def subscribe(api, url: str, event_types=("run.completed",)) -> dict:
    response = api.post("/api/v1/webhooks", {"url": url, "eventTypes": list(event_types)}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def settled_delivery(endpoint_id, timeout: float = 90) -> WebhookDelivery:
    return wait_until(
        lambda: WebhookDelivery.objects.filter(endpoint_id=endpoint_id).exclude(status=DeliveryStatus.PENDING).first(),
        timeout=timeout,
        what="the delivery to settle",
    )


@pytest.mark.slow
def test_a_delivery_reaches_a_receiver_down_for_three_backoff_caps_signed_and_under_one_id(stack, api, receivers):
    stack.start_worker()
    stack.start_webhooks()
    # Down (its port closed), then up but failing once, then accepting: the receiver sees the repeat.
    receiver = receivers((503, 204), start=False)
    endpoint = subscribe(api, receiver.url)

    run = finished_run(post_message(api, "tell me when you are done")["submissionId"])
    assert run.state == RunState.COMPLETED
    delivery = wait_until(
        lambda: WebhookDelivery.objects.filter(endpoint_id=endpoint["id"], attempts__gte=1).first(),
        timeout=30,
        what="the first attempt",
    )
    down_until = delivery.last_attempt_at.timestamp() + RECEIVER_DOWN_SECONDS
    wait_until(
        lambda: time.time() >= down_until and WebhookDelivery.objects.get(id=delivery.id).attempts >= 3,
        timeout=RECEIVER_DOWN_SECONDS + 30,
        interval=0.5,
        what="the receiver's outage to last, with retries meanwhile",
    )
    refused = WebhookDelivery.objects.get(id=delivery.id)
    assert refused.status == DeliveryStatus.PENDING
    assert (refused.last_response_code, refused.last_error) == (None, "connection failed")
    receiver.start()

    delivered = settled_delivery(endpoint["id"])

    assert delivered.status == DeliveryStatus.DELIVERED
    assert delivered.last_response_code == 204
    assert delivered.attempts >= refused.attempts + 2
    first, second = receiver.requests()
    assert first.delivery_id == second.delivery_id == str(delivered.id)
    assert first.signed_by(endpoint["secret"]) and second.signed_by(endpoint["secret"])
    assert first.body == second.body
    body = second.json()
    assert body["id"] == str(delivered.id)
    assert body["type"] == "run.completed"
    assert body["data"]["runId"] == str(run.id)
    assert body["data"]["submissionId"] == str(run.submission_id)
    assert body["data"]["conversationId"] == str(run.submission.conversation_id)
    assert body["data"]["status"] == "completed"
    assert abs(int(second.headers["Impo-Webhook-Timestamp"]) - time.time()) < 120
    assert not second.signed_by("whsec_" + "0" * 64)


def test_a_run_of_one_user_is_never_sent_to_another_users_endpoint(shared_webhooks, api, other_api, receivers):
    mine, theirs = receivers(), receivers()
    my_endpoint = subscribe(api, mine.url, ["run.completed", "run.failed"])
    their_endpoint = subscribe(other_api, theirs.url, ["run.completed", "run.failed"])

    finished_run(post_message(other_api, "only mine to hear about")["submissionId"])

    delivered = settled_delivery(their_endpoint["id"])
    assert delivered.status == DeliveryStatus.DELIVERED
    assert [request.delivery_id for request in theirs.requests()] == [str(delivered.id)]
    assert mine.requests() == []
    assert not WebhookDelivery.objects.filter(endpoint_id=my_endpoint["id"]).exists()
    assert api.get(f"/api/v1/webhooks/{their_endpoint['id']}/deliveries").status_code == 404


def test_a_receiver_that_keeps_failing_leaves_the_delivery_failed_after_the_last_attempt(stack, api, receivers):
    stack.env["IMPO_WEBHOOK_MAX_ATTEMPTS"] = "3"
    stack.start_worker()
    stack.start_webhooks()
    receiver = receivers((500,))
    endpoint = subscribe(api, receiver.url)

    finished_run(post_message(api, "nobody listens properly")["submissionId"])

    failed = settled_delivery(endpoint["id"])
    assert failed.status == DeliveryStatus.FAILED
    assert (failed.attempts, failed.last_response_code) == (3, 500)
    assert {request.delivery_id for request in receiver.requests()} == {str(failed.id)}
    assert len(receiver.requests()) == 3
    [listed] = api.get(f"/api/v1/webhooks/{endpoint['id']}/deliveries").json()["deliveries"]
    assert (listed["id"], listed["status"], listed["attempts"]) == (str(failed.id), "failed", 3)
