"""Deliveries are derived from runtime's event log: once per (endpoint, event), only for the event's owner."""

import pytest

from impo.celery import app
from runtime.events import append_events
from runtime.models import Event, EventType, Run
from tests.client import send_message
from webhooks import services
from webhooks.models import PendingSourceEvent, WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db


def endpoint(owner, event_types=("run.completed",), **fields) -> WebhookEndpoint:
    url = "https://hooks.example.com/x"
    return services.create_endpoint(owner=owner, url=url, event_types=list(event_types), **fields)


def admitted_run(api) -> Run:
    receipt = send_message(api, "hi", client_message_id="m-1").json()
    return Run.objects.select_related("submission").get(submission_id=receipt["submissionId"])


def log(run: Run, event_type: str, **payload) -> Event:
    append_events(run.submission.conversation_id, run.submission_id, [(event_type, payload)])
    return Event.objects.filter(conversation_id=run.submission.conversation_id).latest("seq")


def test_an_event_of_a_webhook_type_is_noted_in_its_own_transaction_and_others_are_not(api):
    run = admitted_run(api)

    completed = log(run, EventType.RUN_COMPLETED, status="completed")
    log(run, EventType.TEXT_DELTA, messageId="x", partId="p", delta="d")

    assert list(PendingSourceEvent.objects.values_list("event_id", flat=True)) == [completed.id]


def test_every_webhook_type_known_to_runtime_is_noted(api):
    run = admitted_run(api)
    webhook_types = {"run.completed", "run.failed", "run.cancelled", "run.pending_reconciliation"}

    events = [log(run, event_type) for event_type in sorted(webhook_types)]

    assert set(PendingSourceEvent.objects.values_list("event_id", flat=True)) == {event.id for event in events}


def test_collection_makes_one_delivery_per_subscribed_endpoint_and_never_twice(api, user, other_user):
    subscribed, also_subscribed = endpoint(user), endpoint(user, ["run.completed", "run.failed"])
    endpoint(user, ["run.failed"])
    endpoint(user, active=False)
    endpoint(other_user)
    run = admitted_run(api)
    event = log(run, EventType.RUN_COMPLETED, status="completed", messageId=str(run.submission.assistant_message_id))

    assert services.collect_deliveries() == services.Collected(events=1, deliveries=2)
    assert services.collect_deliveries() == services.Collected(events=0, deliveries=0)

    deliveries = WebhookDelivery.objects.filter(event=event)
    assert {delivery.endpoint_id for delivery in deliveries} == {subscribed.id, also_subscribed.id}
    assert not PendingSourceEvent.objects.exists()
    payload = deliveries.get(endpoint=subscribed).payload
    assert payload["type"] == "run.completed"
    assert payload["id"] == str(deliveries.get(endpoint=subscribed).id)
    assert payload["data"]["runId"] == str(run.id)
    assert payload["data"]["status"] == "completed"


def test_an_endpoint_made_after_an_event_does_not_receive_it(api, user):
    run = admitted_run(api)
    log(run, EventType.RUN_FAILED, status="failed")
    endpoint(user, ["run.failed"])

    assert services.collect_deliveries() == services.Collected(events=1, deliveries=0)


def test_the_wake_up_names_the_registered_delivery_task():
    # A misspelled task name fails silently: the message is sent and no worker ever runs it.
    app.loader.import_default_modules()

    assert services.DELIVER_TASK in app.tasks
