"""The sender records a pass's accepted pushes without waiting for a row being deleted meanwhile: a deleter (a
browser's removal here) takes its rows in an order of its own, and the two waiting for each other could deadlock,
failing the person's removal."""

import threading

import pytest
from django.db import connection, transaction

from devtools.push_service import Browser
from runtime.models import Run, RunState
from runtime.services.claims import claim_run, finish_run
from tests.client import post_message
from webhooks import locks, push_services
from webhooks.models import PushDelivery, PushStatus, PushSubscription

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_push_accepted_while_its_browser_is_being_removed_is_recorded_without_waiting(api, user):
    browser = Browser(endpoint="https://push.example.com/push/one", token="one")
    keys = browser.to_json()["keys"]
    subscription, _ = push_services.register_subscription(
        owner=user, endpoint=browser.endpoint, p256dh=keys["p256dh"], auth=keys["auth"], expiration_ms=None
    )
    run = Run.objects.get(submission_id=post_message(api, "notify me")["submissionId"])
    finish_run(claim_run(run.id, "test-worker"), RunState.COMPLETED)
    push_services.dispatch_notifications()
    [attempt] = push_services.claim_attempts()

    removing, release = threading.Event(), threading.Event()

    def remove_the_browser():
        """The owner's removal (`push_services.delete_subscription`), held open before its commit."""
        try:
            with transaction.atomic():
                locks.lock_subscription_for_owner(user, subscription.id).delete()
                removing.set()
                release.wait(60)
        finally:
            connection.close()

    def record_the_push():
        try:
            push_services.record_outcomes([push_services.PushOutcome(attempt, 201)])
        finally:
            connection.close()

    remover = threading.Thread(target=remove_the_browser)
    remover.start()
    try:
        assert removing.wait(30), "the removal did not start"
        recorder = threading.Thread(target=record_the_push)
        recorder.start()
        recorder.join(30)
        assert not recorder.is_alive(), "the record waited for the removal's rows"
        assert PushDelivery.objects.get(id=attempt.delivery_id).status == PushStatus.PENDING
    finally:
        release.set()
        remover.join(60)

    assert not PushSubscription.objects.filter(id=subscription.id).exists()
    assert not PushDelivery.objects.filter(id=attempt.delivery_id).exists()
