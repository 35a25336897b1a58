"""Staff see every delivery in the admin, read-only, and can resend one under the same id."""

import pytest

from runtime.events import append_events
from runtime.models import EventType, Run
from tests.client import send_message
from webhooks import services
from webhooks.models import DeliveryStatus, WebhookDelivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_delivery(api, user) -> WebhookDelivery:
    endpoint = services.create_endpoint(owner=user, url="https://hooks.example.com/x", event_types=["run.failed"])
    receipt = send_message(api, "hi", client_message_id="m-1").json()
    run = Run.objects.select_related("submission").get(submission_id=receipt["submissionId"])
    append_events(run.submission.conversation_id, run.submission_id, [(EventType.RUN_FAILED, {"status": "failed"})])
    services.collect_deliveries()
    WebhookDelivery.objects.update(status=DeliveryStatus.FAILED, attempts=20, last_response_code=500)
    return WebhookDelivery.objects.get(endpoint=endpoint)


def test_deliveries_are_listed_by_status_and_cannot_be_edited(desk, failed_delivery):
    listed = desk.get("/admin/webhooks/webhookdelivery/?status__exact=failed").content.decode()
    pending = desk.get("/admin/webhooks/webhookdelivery/?status__exact=pending").content.decode()

    assert str(failed_delivery.id) in listed
    assert str(failed_delivery.id) not in pending
    change = desk.get(f"/admin/webhooks/webhookdelivery/{failed_delivery.id}/change/").content.decode()
    assert 'name="_save"' not in change
    assert desk.get("/admin/webhooks/webhookdelivery/add/").status_code == 403


def test_resending_makes_a_failed_delivery_due_again_under_the_same_id(desk, failed_delivery):
    response = desk.post(
        "/admin/webhooks/webhookdelivery/",
        {"action": "resend", "_selected_action": [str(failed_delivery.id)]},
        follow=True,
    )

    assert "1 of 1 deliveries queued again" in response.content.decode()
    resent = WebhookDelivery.objects.get()
    assert (resent.id, resent.status, resent.attempts) == (failed_delivery.id, DeliveryStatus.PENDING, 0)
    assert services.claim_attempt(resent.id).number == 1


def test_an_endpoints_secret_is_not_shown_to_staff(desk, failed_delivery):
    page = desk.get(f"/admin/webhooks/webhookendpoint/{failed_delivery.endpoint_id}/change/").content.decode()

    assert failed_delivery.endpoint.secret not in page
