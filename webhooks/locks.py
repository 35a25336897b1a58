"""Every row lock webhooks takes: pending source events, endpoints and deliveries, and for Web Push runtime's
notifications, subscriptions, preferences and push deliveries (the global order, with every app's rows, is in
docs/locking.md: user, then pending source event, then endpoint, then delivery; for push: user, then notification,
then subscription, then push delivery; a preference alone).

FOR NO KEY UPDATE wherever the row is changed in place; FOR UPDATE only where it is deleted (an endpoint, a
pending source event). The loops' batches skip what another transaction holds: the next pass finds it.
"""

from django.db.models import Q

from core.errors import NotFound
from runtime.models import Notification
from webhooks.models import (
    DeliveryStatus,
    NotificationPreference,
    PendingSourceEvent,
    PushDelivery,
    PushStatus,
    PushSubscription,
    WebhookDelivery,
    WebhookEndpoint,
)


def lock_endpoint_for_owner(owner, endpoint_id, *, to_delete: bool = False) -> WebhookEndpoint:
    """The owner's endpoint, to change or (`to_delete`) to delete; another user's is not found, like a missing one."""
    endpoint = (
        WebhookEndpoint.objects.select_for_update(no_key=not to_delete).filter(id=endpoint_id, owner=owner).first()
    )
    if endpoint is None:
        raise NotFound("No such webhook endpoint.")
    return endpoint


def lock_active_endpoints_of(owner_ids) -> list[WebhookEndpoint]:
    """The owners' active endpoints, held so one deleted meanwhile waits for the deliveries made to it."""
    return list(WebhookEndpoint.objects.select_for_update(no_key=True).filter(owner_id__in=owner_ids, active=True))


def lock_free_source_events(limit: int) -> list:
    """Up to `limit` ids of events waiting to be collected that no other collector holds, oldest first; the caller
    deletes their markers."""
    markers = PendingSourceEvent.objects.select_for_update(skip_locked=True).order_by("event")
    return list(markers.values_list("event_id", flat=True)[:limit])


def lock_due_delivery(delivery_id, *, now) -> WebhookDelivery | None:
    """The delivery with its endpoint (not locked) if it is pending, due and no other sender holds it."""
    return (
        WebhookDelivery.objects.select_for_update(no_key=True, skip_locked=True, of=("self",))
        .select_related("endpoint")
        .filter(id=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .first()
    )


def lock_delivery_of_attempt(delivery_id, attempt_number: int) -> WebhookDelivery | None:
    """The delivery while that attempt is still its latest and it is pending, waiting for its holder."""
    return (
        WebhookDelivery.objects.select_for_update(no_key=True)
        .filter(id=delivery_id, status=DeliveryStatus.PENDING, attempts=attempt_number)
        .first()
    )


def lock_free_deliveries(condition: Q, *, order_by: str = "id", limit: int | None = None) -> list:
    """Ids of deliveries matching `condition` that no other transaction holds (the staff's resend, the re-wake
    loop); the caller updates them by id."""
    deliveries = WebhookDelivery.objects.select_for_update(no_key=True, skip_locked=True).filter(condition)
    ids = deliveries.order_by(order_by).values_list("id", flat=True)
    return list(ids[:limit] if limit is not None else ids)


# --- Web Push -------------------------------------------------------------------------------------------------


def lock_subscription_by_endpoint(endpoint: str) -> PushSubscription | None:
    """The subscription registered for this endpoint, if any, whoever owns it (FOR UPDATE: it may be deleted)."""
    return PushSubscription.objects.select_for_update().filter(endpoint=endpoint).first()


def lock_subscription_for_owner(owner, subscription_id) -> PushSubscription:
    """The owner's subscription, to delete; another user's is not found, like a missing one."""
    subscription = PushSubscription.objects.select_for_update().filter(id=subscription_id, owner=owner).first()
    if subscription is None:
        raise NotFound("No such push subscription.")
    return subscription


def lock_subscription_of_push_delivery(delivery_id) -> PushSubscription | None:
    """The subscription a push delivery was made to (FOR UPDATE: a 404 or 410 deletes it), taken before the
    delivery, in the order an owner's removal takes them."""
    return PushSubscription.objects.select_for_update().filter(deliveries__id=delivery_id).first()


def lock_preference(owner) -> NotificationPreference:
    """The owner's notification preference, made on first use."""
    return NotificationPreference.objects.select_for_update().get_or_create(owner=owner)[0]


def lock_undispatched_notifications(limit: int) -> list[Notification]:
    """Up to `limit` of runtime's notifications not yet dispatched that no other loop holds, oldest first."""
    return list(
        Notification.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(dispatched_at__isnull=True)
        .select_related("run__submission__conversation__task")
        .order_by("created_at")[:limit]
    )


def lock_subscriptions_of(owner_ids) -> list[PushSubscription]:
    """The owners' subscriptions, held so one removed meanwhile waits for the deliveries made to it."""
    return list(PushSubscription.objects.select_for_update(no_key=True).filter(owner_id__in=owner_ids))


def lock_due_push_deliveries(limit: int, *, now) -> list[PushDelivery]:
    """Up to `limit` push deliveries pending and due that no other sender holds, the longest due first, with their
    subscriptions (not locked)."""
    return list(
        PushDelivery.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("subscription")
        .filter(status=PushStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")[:limit]
    )


def lock_push_delivery_of_attempt(delivery_id, *, attempt: int) -> PushDelivery | None:
    """The push delivery whose outcome this attempt records, unless a later attempt or a removal overtook it, with its
    subscription, not locked here: an outcome that deletes it locked it first (`lock_subscription_of_push_delivery`),
    and a lock taken on it after the delivery's would wait on a removal that holds it and waits for the delivery."""
    return (
        PushDelivery.objects.select_for_update(of=("self",))
        .select_related("subscription")
        .filter(id=delivery_id, status=PushStatus.PENDING, attempts=attempt)
        .first()
    )


def lock_push_deliveries_of_attempts(numbers: dict) -> set:
    """Of the push deliveries {id: attempt number} whose attempts were accepted, the ids still pending under that
    attempt (a later attempt or a removal overtakes one).

    Skip locked: no sender holds a claimed delivery, so one held now is being deleted (with its subscription, its
    notification or its conversation), and a deleter takes a batch's rows in an order of its own: waiting for it
    could deadlock. A row skipped and not deleted after all stays claimed, and is sent again after its claim's
    deadline, as after a crash, its `Topic` replacing the copy."""
    held = (
        PushDelivery.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(id__in=list(numbers), status=PushStatus.PENDING)
        .values_list("id", "attempts")
    )
    return {delivery_id for delivery_id, attempts in held if numbers[delivery_id] == attempts}
