"""Write paths of Web Push (docs/design.md §10): subscriptions, preferences, runtime's notifications made into
deliveries, and the attempts of each.

Like webhook deliveries, a push is claimed in a durable transaction, sent outside any (`push.py`), and its outcome
written in another, conditional on the attempt number; a pass of the sender claims every push it sends in one
transaction, and records the accepted ones in one more. A delivery the push service accepted is `sent` and never
claimed again; one whose sender died between claim and answer is due again once the claim's deadline passes, and
its repeat carries the same `Topic`, so the push service keeps one copy.
"""

import hmac
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.error_codes import ErrorCode
from core.errors import Conflict
from runtime import locks as runtime_locks
from runtime import subscribers
from runtime.models import Notification, NotificationKind
from tools import capabilities
from webhooks import locks, selectors
from webhooks.models import NotificationPreference, PushDelivery, PushStatus, PushSubscription
from webhooks.services import attempt_deadline_seconds, backoff_seconds, exhausted

DISPATCH_BATCH = 200
SEND_BATCH = 100
ERROR_MAX = 2000

# --- subscriptions and preferences ----------------------------------------------------------------------


def register_subscription(*, owner, endpoint: str, p256dh: str, auth: str, expiration_ms: int | None):
    """Registers the browser's subscription; returns (subscription, created). The same endpoint again updates its
    keys in place (idempotent). An endpoint registered by another account moves to this one (the browser is now
    signed in here) only with that subscription's keys: an endpoint URL alone is no proof of holding the browser's
    subscription, and whoever learned one could otherwise turn off someone's notifications."""
    expires_at = datetime.fromtimestamp(expiration_ms / 1000, tz=UTC) if expiration_ms is not None else None
    with transaction.atomic(durable=True):
        # The owner's row serialises their registrations, so the cap holds.
        runtime_locks.lock_owner(owner)
        existing = locks.lock_subscription_by_endpoint(endpoint)
        if existing is not None and existing.owner_id == owner.pk:
            existing.p256dh, existing.auth, existing.expires_at = p256dh, auth, expires_at
            existing.save(update_fields=["p256dh", "auth", "expires_at", "updated_at"])
            return existing, False
        if existing is not None and not _same_keys(existing, p256dh=p256dh, auth=auth):
            raise Conflict(
                "This push endpoint belongs to another account; only its browser's keys can move it here.",
                code=ErrorCode.PUSH_ENDPOINT_TAKEN,
            )
        if PushSubscription.objects.filter(owner=owner).count() >= settings.IMPO_PUSH_SUBSCRIPTIONS_PER_USER:
            raise Conflict(
                f"At most {settings.IMPO_PUSH_SUBSCRIPTIONS_PER_USER} push subscriptions per account.",
                code=ErrorCode.PUSH_SUBSCRIPTION_LIMIT_REACHED,
            )
        if existing is not None:
            existing.delete()
        subscription = PushSubscription.objects.create(
            owner=owner, endpoint=endpoint, p256dh=p256dh, auth=auth, expires_at=expires_at
        )
        return subscription, True


def _same_keys(subscription: PushSubscription, *, p256dh: str, auth: str) -> bool:
    # `auth` is the subscription's secret: compared in constant time, so timing tells nothing of it.
    return hmac.compare_digest(subscription.p256dh, p256dh) & hmac.compare_digest(subscription.auth, auth)


def delete_subscription(*, owner, subscription_id: uuid.UUID) -> None:
    with transaction.atomic(durable=True):
        locks.lock_subscription_for_owner(owner, subscription_id).delete()


def delete_subscriptions_of(owner) -> None:
    """Every push subscription of the owner, with its deliveries (an account's deletion: joins its transaction)."""
    for subscription_id in PushSubscription.objects.filter(owner=owner).values_list("id", flat=True):
        locks.lock_subscription_for_owner(owner, subscription_id).delete()


def update_preferences(*, owner, kinds: dict[str, bool]) -> NotificationPreference:
    """`kinds`: {kind: on}; a kind not named keeps its setting."""
    with transaction.atomic(durable=True):
        preference = locks.lock_preference(owner)
        muted = set(preference.muted_kinds)
        muted |= {kind for kind, on in kinds.items() if not on}
        muted -= {kind for kind, on in kinds.items() if on}
        preference.muted_kinds = sorted(muted)
        preference.save()
        return preference


# --- dispatch: runtime's notifications become deliveries -------------------------------------------------


def dispatch_notifications() -> int:
    """Turns undispatched notifications into one delivery per subscription of their owner; returns how many
    notifications were taken.

    Skipped, and marked dispatched all the same: a kind the owner turned off, and a notification whose
    conversation a page of the owner shows right now (someone looking needs no buzz; Redis unreachable counts as
    nobody looking). A subscription hears of what happens after it was registered. SKIP LOCKED lets two loops
    share the work; the unique (notification, subscription) pair makes a repeat a no-op.
    """
    with transaction.atomic(durable=True):
        notifications = locks.lock_undispatched_notifications(DISPATCH_BATCH)
        if not notifications:
            return 0
        owners = {notification.run.owner_id for notification in notifications}
        muted = dict(NotificationPreference.objects.filter(owner_id__in=owners).values_list("owner_id", "muted_kinds"))
        in_view = subscribers.conversations_in_view(
            {notification.run.submission.conversation_id for notification in notifications}
        )
        subscriptions = locks.lock_subscriptions_of(owners)
        now = timezone.now()
        deliveries = []
        for notification in notifications:
            run = notification.run
            if notification.kind in muted.get(run.owner_id, ()) or str(run.submission.conversation_id) in in_view:
                continue
            payload = selectors.push_payload(notification)
            deliveries += [
                PushDelivery(
                    notification=notification,
                    subscription=subscription,
                    kind=notification.kind,
                    payload=payload,
                    next_attempt_at=now,
                    scheduled_at=now,
                )
                for subscription in subscriptions
                if subscription.owner_id == run.owner_id and subscription.created_at <= notification.created_at
            ]
        PushDelivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        Notification.objects.filter(id__in=[notification.id for notification in notifications]).update(
            dispatched_at=now
        )
        return len(notifications)


# --- attempts --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushAttempt:
    delivery_id: uuid.UUID
    number: int
    notification_id: uuid.UUID
    kind: str
    endpoint: str
    p256dh: str
    auth: str
    payload: dict


@dataclass(frozen=True)
class PushOutcome:
    """What the push service answered one attempt (`response_code` None: no answer came)."""

    attempt: PushAttempt
    response_code: int | None
    error: str = ""
    retry_after: float | None = None
    # A refusal a repeat cannot change (a malformed or too large message, a target now forbidden).
    permanent: bool = False

    @property
    def accepted(self) -> bool:
        return self.response_code is not None and 200 <= self.response_code < 300


def claim_attempts(limit: int = SEND_BATCH) -> list[PushAttempt]:
    """Takes up to `limit` due deliveries for one attempt each, in one transaction: what a burst of runs ending
    at once makes due is claimed together, not in a transaction per push. A delivery another sender holds is
    skipped; one out of attempts is marked failed instead."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        deliveries = locks.lock_due_push_deliveries(limit, now=now)
        spent = {delivery.id for delivery in deliveries if exhausted(delivery, now)}
        if spent:
            PushDelivery.objects.filter(id__in=spent).update(status=PushStatus.FAILED, updated_at=now)
        taken = [delivery for delivery in deliveries if delivery.id not in spent]
        PushDelivery.objects.filter(id__in=[delivery.id for delivery in taken]).update(
            attempts=F("attempts") + 1,
            last_attempt_at=now,
            next_attempt_at=now + timedelta(seconds=attempt_deadline_seconds()),
            updated_at=now,
        )
    return [
        PushAttempt(
            delivery_id=delivery.id,
            number=delivery.attempts + 1,
            notification_id=delivery.notification_id,
            kind=delivery.kind,
            endpoint=delivery.subscription.endpoint,
            p256dh=delivery.subscription.p256dh,
            auth=delivery.subscription.auth,
            payload=delivery.payload,
        )
        for delivery in taken
    ]


# The buttons of an approval's notification (its Notification `actions`), in the order shown.
DECISION_ACTIONS = (("approve", "Approve"), ("deny", "Deny"))


def with_decision_actions(attempt: PushAttempt) -> PushAttempt:
    """An approval push, while its approval is pending, carries Approve and Deny, each with a capability minted for
    this attempt (docs/notifications.md "Approve or deny from the notification"). The tokens live in this attempt's
    message only, encrypted to the browser: the stored payload never holds them, and only their hashes are kept."""
    tool_call_id = attempt.payload.get("toolCallId")
    if attempt.kind != NotificationKind.APPROVAL or not tool_call_id:
        return attempt
    tokens = capabilities.mint_for_call(tool_call_id)
    if tokens is None:
        return attempt
    actions = [{"action": action, "title": title, "capability": tokens[action]} for action, title in DECISION_ACTIONS]
    return replace(attempt, payload={**attempt.payload, "actions": actions})


def record_outcomes(outcomes: list[PushOutcome]) -> None:
    """Writes what the push service answered a pass's attempts, once each was answered or timed out (within its
    claim's deadline): the accepted ones together in one transaction, each other one in its own."""
    accepted = {outcome.attempt.delivery_id: outcome for outcome in outcomes if outcome.accepted}
    if accepted:
        now = timezone.now()
        with transaction.atomic(durable=True):
            held = locks.lock_push_deliveries_of_attempts(
                {delivery_id: outcome.attempt.number for delivery_id, outcome in accepted.items()}
            )
            by_code = defaultdict(list)
            for delivery_id in held:
                by_code[accepted[delivery_id].response_code].append(delivery_id)
            for code, delivery_ids in by_code.items():
                PushDelivery.objects.filter(id__in=delivery_ids).update(
                    status=PushStatus.SENT, sent_at=now, last_response_code=code, last_error="", updated_at=now
                )
    for outcome in outcomes:
        if not outcome.accepted:
            _record_refusal(outcome)


def _record_refusal(outcome: PushOutcome) -> None:
    """Writes an attempt the push service did not accept, unless a later attempt or a removal overtook it.

    404/410: the subscription is gone (RFC 8030 §7.3), so it is removed with its deliveries. `permanent`: failed.
    Anything else is tried again after the capped backoff, or after the push service's `Retry-After` if that is
    longer (capped too).
    """
    attempt, response_code = outcome.attempt, outcome.response_code
    now = timezone.now()
    with transaction.atomic(durable=True):
        gone = response_code in (404, 410)
        if gone:
            # The subscription before its delivery, as an owner's removal locks them (docs/locking.md): locked the
            # other way round, the two deadlocked.
            locks.lock_subscription_of_push_delivery(attempt.delivery_id)
        delivery = locks.lock_push_delivery_of_attempt(attempt.delivery_id, attempt=attempt.number)
        if delivery is None:
            return
        if gone:
            delivery.subscription.delete()
            return
        delivery.last_response_code = response_code
        delivery.last_error = outcome.error[:ERROR_MAX]
        if outcome.permanent or exhausted(delivery, now):
            delivery.status = PushStatus.FAILED
        else:
            delay = max(backoff_seconds(delivery.attempts), outcome.retry_after or 0)
            delivery.next_attempt_at = now + timedelta(seconds=min(delay, settings.IMPO_WEBHOOK_BACKOFF_CAP_SECONDS))
        delivery.save()
