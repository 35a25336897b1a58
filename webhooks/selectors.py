"""Read paths of webhooks and Web Push, scoped to an owner and shaped for the wire."""

import uuid

from django.urls import reverse

from core.errors import NotFound
from runtime.models import Message, Notification, NotificationKind
from tools.models import ToolCall, ToolCallState
from webhooks.models import NotificationPreference, PushSubscription, WebhookDelivery, WebhookEndpoint

RECENT_DELIVERIES = 50


def endpoints_for_owner(owner) -> list[WebhookEndpoint]:
    return list(WebhookEndpoint.objects.filter(owner=owner).order_by("created_at"))


def endpoint_for_owner(owner, endpoint_id: uuid.UUID) -> WebhookEndpoint:
    """Another user's endpoint is not found, like one that does not exist."""
    endpoint = WebhookEndpoint.objects.filter(id=endpoint_id, owner=owner).first()
    if endpoint is None:
        raise NotFound("No such webhook endpoint.")
    return endpoint


def recent_deliveries(endpoint: WebhookEndpoint) -> list[WebhookDelivery]:
    return list(endpoint.deliveries.order_by("-created_at")[:RECENT_DELIVERIES])


def endpoint_to_wire(endpoint: WebhookEndpoint, *, with_secret: bool = False) -> dict:
    wire = {
        "id": str(endpoint.id),
        "url": endpoint.url,
        "eventTypes": list(endpoint.event_types),
        "active": endpoint.active,
        "createdAt": endpoint.created_at.isoformat(),
        "updatedAt": endpoint.updated_at.isoformat(),
    }
    if with_secret:
        wire["secret"] = endpoint.secret
    return wire


def delivery_to_wire(delivery: WebhookDelivery) -> dict:
    def iso(moment):
        return moment.isoformat() if moment else None

    return {
        "id": str(delivery.id),
        "eventType": delivery.event_type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "nextAttemptAt": iso(delivery.next_attempt_at) if delivery.status == "pending" else None,
        "lastAttemptAt": iso(delivery.last_attempt_at),
        "lastResponseCode": delivery.last_response_code,
        "lastError": delivery.last_error,
        "deliveredAt": iso(delivery.delivered_at),
        "createdAt": delivery.created_at.isoformat(),
    }


# --- Web Push ----------------------------------------------------------------------------------------------

MAIN_CHAT_NAME = "Main Chat"
# The start of the reply a notification shows; with the rest of the payload well inside the 4 KiB a push may carry.
BODY_CHARS = 180
_BODY = {
    NotificationKind.FAILED: "The reply failed: {error}",
    NotificationKind.CANCELLED: "The reply was cancelled.",
    NotificationKind.APPROVAL: "{tool} is waiting for your approval.",
    NotificationKind.RECONCILIATION: "The reply is held while what happened at the provider is checked.",
}


def push_subscriptions_for_owner(owner) -> list[PushSubscription]:
    return list(PushSubscription.objects.filter(owner=owner).order_by("created_at"))


def push_subscription_to_wire(subscription: PushSubscription) -> dict:
    """What the owner needs to list and remove a browser: never its keys. The endpoint is shown (it is the owner's
    own, and how a page tells its own browser's subscription from the others) but never logged."""
    return {
        "id": str(subscription.id),
        "endpoint": subscription.endpoint,
        "expiresAt": subscription.expires_at.isoformat() if subscription.expires_at else None,
        "createdAt": subscription.created_at.isoformat(),
    }


def preferences_to_wire(owner) -> dict:
    preference = NotificationPreference.objects.filter(owner=owner).first()
    muted = set(preference.muted_kinds) if preference else set()
    return {"kinds": {kind: kind not in muted for kind in NotificationKind.values}}


def push_payload(notification: Notification) -> dict:
    """The message a device shows (before encryption): which conversation, what happened, the start of the reply,
    and where a click leads (the chat at the reply, or at the approval)."""
    run = notification.run
    conversation = run.submission.conversation
    task = getattr(conversation, "task", None)
    message_id = str(run.submission.assistant_message_id)
    chat_path = reverse("task-view", args=[task.id]) if task else reverse("main-chat")
    payload = {
        "kind": notification.kind,
        "title": task.title if task else MAIN_CHAT_NAME,
        "runId": str(run.id),
        "conversationId": str(conversation.id),
        "messageId": message_id,
        "url": f"{chat_path}#message-{message_id}",
    }
    if notification.kind == NotificationKind.COMPLETED:
        text = Message.objects.filter(id=message_id).values_list("text", flat=True).first() or ""
        payload["body"] = _start_of(text) or "The reply is ready."
    elif notification.kind == NotificationKind.APPROVAL:
        call = (
            ToolCall.objects.filter(run_id=run.id, state=ToolCallState.AWAITING_APPROVAL)
            .order_by("created_at")
            .values("id", "tool_name")
            .first()
        )
        payload["body"] = _BODY[notification.kind].format(tool=call["tool_name"] if call else "A tool call")
        if call:
            payload["toolCallId"] = str(call["id"])
            payload["url"] = f"{chat_path}#approval-{call['id']}"
    else:
        payload["body"] = _BODY[notification.kind].format(error=_start_of(run.error_message) or run.error_code)
    return payload


def _start_of(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1].rstrip() + "…"
