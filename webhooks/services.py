"""Write paths of webhooks: endpoints, collection of deliveries from the event log, attempts and their outcomes.

Each entry point is one durable transaction. The HTTP request itself is made by `delivery.py` between two of
them (claim, then outcome), so no row lock or transaction is held while a receiver answers.
"""

import random
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.error_codes import ErrorCode
from core.errors import Conflict
from runtime import locks as runtime_locks
from runtime import outbound
from runtime.models import Event
from webhooks import locks, signing
from webhooks.models import DeliveryStatus, PendingSourceEvent, WebhookDelivery, WebhookEndpoint

DELIVER_TASK = "webhooks.deliver"
COLLECT_BATCH = 200
REWAKE_BATCH = 200
ERROR_MAX = 2000


# --- endpoints ---------------------------------------------------------------------------------------


def create_endpoint(*, owner, url: str, event_types: list[str], active: bool = True) -> WebhookEndpoint:
    with transaction.atomic(durable=True):
        # The owner's row serialises concurrent creations, so the cap holds.
        runtime_locks.lock_owner(owner)
        if WebhookEndpoint.objects.filter(owner=owner).count() >= settings.IMPO_WEBHOOK_ENDPOINTS_PER_USER:
            raise Conflict(
                f"At most {settings.IMPO_WEBHOOK_ENDPOINTS_PER_USER} webhook endpoints per account.",
                code=ErrorCode.WEBHOOK_LIMIT_REACHED,
            )
        return WebhookEndpoint.objects.create(
            owner=owner, url=url, event_types=event_types, active=active, secret=signing.new_secret()
        )


def update_endpoint(*, owner, endpoint_id: uuid.UUID, changes: dict) -> WebhookEndpoint:
    """`changes` holds any of url, event_types, active."""
    with transaction.atomic(durable=True):
        endpoint = locks.lock_endpoint_for_owner(owner, endpoint_id)
        for name, value in changes.items():
            setattr(endpoint, name, value)
        endpoint.save(update_fields=[*changes, "updated_at"])
        return endpoint


def delete_endpoint(*, owner, endpoint_id: uuid.UUID) -> None:
    with transaction.atomic(durable=True):
        locks.lock_endpoint_for_owner(owner, endpoint_id, to_delete=True).delete()


def delete_endpoints_of(owner) -> None:
    """Every endpoint of the owner, with its deliveries (an account's deletion: joins its transaction). Each is
    locked as a single delete locks it, so a collection delivering to it finishes first."""
    for endpoint_id in WebhookEndpoint.objects.filter(owner=owner).values_list("id", flat=True):
        locks.lock_endpoint_for_owner(owner, endpoint_id, to_delete=True).delete()


# --- collection: the event log becomes deliveries ---------------------------------------------------


@dataclass(frozen=True)
class Collected:
    events: int
    deliveries: int


def collect_deliveries() -> Collected:
    """Turns newly logged events of webhook types into one delivery per subscribed endpoint of their owner.

    Why a trigger-fed table rather than a cursor over event ids: ids are drawn from a sequence before their
    transaction commits, so an event with a lower id can become visible after a higher one; a cursor
    "id > last seen" would skip it for good. The trigger inserts the marker in the event's own transaction,
    so a marker is visible exactly when its event is, and it is deleted here in the same transaction that
    makes the deliveries: each event is collected once, whenever it commits. SKIP LOCKED lets two loops
    share the work; the unique (endpoint, event) constraint makes any repeat a no-op.
    """
    with transaction.atomic(durable=True):
        event_ids = locks.lock_free_source_events(COLLECT_BATCH)
        if not event_ids:
            return Collected(events=0, deliveries=0)
        events = list(
            Event.objects.filter(id__in=event_ids)
            .select_related("conversation__task", "submission__run")
            .order_by("id")
        )
        owners = {event.conversation.owner_id for event in events}
        # Locked so an endpoint deleted meanwhile waits for this commit instead of failing it (its deliveries
        # then go with it).
        endpoints = locks.lock_active_endpoints_of(owners)
        now = timezone.now()
        deliveries = [
            _delivery(endpoint, event, now)
            for event in events
            for endpoint in endpoints
            if endpoint.owner_id == event.conversation.owner_id
            and event.type in endpoint.event_types
            # An endpoint hears of what happens after it was made, not of a backlog.
            and endpoint.created_at <= event.created_at
        ]
        WebhookDelivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        PendingSourceEvent.objects.filter(event_id__in=event_ids).delete()
        for delivery in deliveries:
            wake_delivery(delivery.id)
        return Collected(events=len(event_ids), deliveries=len(deliveries))


def _delivery(endpoint: WebhookEndpoint, event: Event, now) -> WebhookDelivery:
    delivery_id = uuid.uuid4()
    return WebhookDelivery(
        id=delivery_id,
        endpoint=endpoint,
        event=event,
        event_type=event.type,
        payload=_payload(delivery_id, event),
        next_attempt_at=now,
        scheduled_at=now,
        last_woken_at=now,
    )


def _payload(delivery_id: uuid.UUID, event: Event) -> dict:
    """The body (docs/api.md "Webhooks"): what happened to which run, as the event recorded it."""
    submission = event.submission
    run = getattr(submission, "run", None) if submission else None
    task = getattr(event.conversation, "task", None)
    data = {
        "runId": str(run.id) if run else None,
        "submissionId": str(event.submission_id) if event.submission_id else None,
        "conversationId": str(event.conversation_id),
        "taskId": str(task.id) if task else None,
        "messageId": str(submission.assistant_message_id) if submission else None,
        "status": event.payload.get("status") or (run.state if run else None),
        "error": event.payload.get("error"),
    }
    for name in ("toolCallId", "toolName", "reason"):
        if name in event.payload:
            data[name] = event.payload[name]
    return {
        "id": str(delivery_id),
        "type": event.type,
        "occurredAt": event.created_at.isoformat(),
        "sequence": event.seq,
        "data": data,
    }


# --- attempts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    delivery_id: uuid.UUID
    number: int
    url: str
    event_type: str
    secret: str
    body: bytes


def attempt_deadline_seconds() -> float:
    """How long a claimed attempt is its sender's alone: past it, the delivery is due again.

    Longer than one request can take (connect, write and the response's head, each bounded by the timeout),
    so a live sender is never overtaken; a sender that died is replaced once it passes.
    """
    return 3 * settings.IMPO_WEBHOOK_TIMEOUT_SECONDS + 5


def backoff_seconds(attempts: int) -> float:
    """Capped exponential backoff with jitter: half the step fixed, half random, so a crowd of retries spreads."""
    base, cap = settings.IMPO_WEBHOOK_BACKOFF_BASE_SECONDS, settings.IMPO_WEBHOOK_BACKOFF_CAP_SECONDS
    step = min(cap, base * 2 ** (attempts - 1))
    return step / 2 + random.uniform(0, step / 2)


def exhausted(delivery, now) -> bool:
    """Whether a delivery (a webhook's or a push's) has had all the attempts or all the time it is given."""
    too_old = now - delivery.scheduled_at >= timedelta(seconds=settings.IMPO_WEBHOOK_MAX_AGE_SECONDS)
    return delivery.attempts >= settings.IMPO_WEBHOOK_MAX_ATTEMPTS or too_old


def claim_attempt(delivery_id) -> Attempt | None:
    """Takes a due delivery for one attempt, or None when it is not due, done, or another sender holds it."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        delivery = locks.lock_due_delivery(delivery_id, now=now)
        if delivery is None:
            return None
        if not delivery.endpoint.active or exhausted(delivery, now):
            delivery.status = DeliveryStatus.FAILED
            if not delivery.endpoint.active:
                delivery.last_error = "the endpoint was deactivated"
            delivery.save(update_fields=["status", "last_error", "updated_at"])
            return None
        delivery.attempts += 1
        delivery.last_attempt_at = now
        delivery.next_attempt_at = now + timedelta(seconds=attempt_deadline_seconds())
        delivery.save(update_fields=["attempts", "last_attempt_at", "next_attempt_at", "updated_at"])
        return Attempt(
            delivery_id=delivery.id,
            number=delivery.attempts,
            url=delivery.endpoint.url,
            event_type=delivery.event_type,
            secret=delivery.endpoint.secret,
            body=signing.body_bytes(delivery.payload),
        )


def record_outcome(attempt: Attempt, *, response_code: int | None, error: str = "") -> str | None:
    """Writes what the receiver answered; returns the delivery's status, or None when the attempt was overtaken.

    Conditional on the attempt number (a fencing token): a sender whose deadline passed and whose delivery
    was claimed again cannot overwrite the newer attempt's outcome.
    """
    now = timezone.now()
    with transaction.atomic(durable=True):
        delivery = locks.lock_delivery_of_attempt(attempt.delivery_id, attempt.number)
        if delivery is None:
            return None
        delivery.last_response_code = response_code
        delivery.last_error = error[:ERROR_MAX]
        if response_code is not None and 200 <= response_code < 300:
            delivery.status = DeliveryStatus.DELIVERED
            delivery.delivered_at = now
        elif exhausted(delivery, now):
            delivery.status = DeliveryStatus.FAILED
        else:
            delay = backoff_seconds(delivery.attempts)
            delivery.next_attempt_at = now + timedelta(seconds=delay)
            delivery.last_woken_at = now
            wake_delivery(delivery.id, delay_seconds=delay)
        delivery.save()
        return delivery.status


def resend_deliveries(delivery_ids) -> int:
    """Staff's resend: each delivery is due now again with a fresh series of attempts, under the same id."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        ids = locks.lock_free_deliveries(Q(id__in=delivery_ids, endpoint__active=True))
        WebhookDelivery.objects.filter(id__in=ids).update(
            status=DeliveryStatus.PENDING,
            attempts=0,
            scheduled_at=now,
            next_attempt_at=now,
            last_woken_at=now,
            delivered_at=None,
            updated_at=now,
        )
        for delivery_id in ids:
            wake_delivery(delivery_id)
        return len(ids)


def rewake_due_deliveries() -> int:
    """Wakes due deliveries whose wake-up may have been lost (the broker is a hint, this table the queue)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.IMPO_WEBHOOK_REWAKE_AFTER_SECONDS)
    with transaction.atomic(durable=True):
        due = Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        not_woken_lately = Q(last_woken_at__isnull=True) | Q(last_woken_at__lt=stale)
        ids = locks.lock_free_deliveries(due & not_woken_lately, order_by="next_attempt_at", limit=REWAKE_BATCH)
        WebhookDelivery.objects.filter(id__in=ids).update(last_woken_at=now)
        for delivery_id in ids:
            wake_delivery(delivery_id)
        return len(ids)


def wake_delivery(delivery_id, *, delay_seconds: float = 0) -> None:
    """Asks a worker to attempt the delivery after commit (by task name: the task module sits above this one);
    the webhooks loop re-sends a wake-up that never left."""
    outbound.send_task_after_commit(
        DELIVER_TASK,
        delivery_id,
        mark_unsent=lambda: WebhookDelivery.objects.filter(id=delivery_id).update(last_woken_at=None),
        delay_seconds=delay_seconds,
    )
