"""Read paths of webhooks, scoped to an owner and shaped for the wire."""

import uuid

from impo.core.errors import NotFound
from webhooks.models import WebhookDelivery, WebhookEndpoint

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
