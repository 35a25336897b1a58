"""Boundary validation and output shapes of the webhooks API."""

from django.core.validators import URLValidator
from rest_framework import serializers

from impo.core.serializers import CleanTextField, StrictBooleanField, StrictSerializer
from webhooks import targets
from webhooks.models import DeliveryStatus, WebhookEndpoint, WebhookEventType

URL_MAX = WebhookEndpoint._meta.get_field("url").max_length
URL_MESSAGE = "Must be an http or https URL."


class EndpointUrlField(CleanTextField):
    """An absolute http(s) URL without credentials in it (they would be sent, and shown, with every delivery),
    aimed at an allowed target (`webhooks.targets`: 400 `webhook_target_forbidden`)."""

    def __init__(self, **kwargs):
        super().__init__(max_length=URL_MAX, **kwargs)
        self.validators.append(URLValidator(schemes=["http", "https"], message=URL_MESSAGE))

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if "@" in value.split("//", 1)[-1].split("/", 1)[0]:
            raise serializers.ValidationError("Must not carry a user name or password.")
        if not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError(URL_MESSAGE)
        # Before the URL validator, which would call a numeric host such as `2130706433` merely ill-formed.
        targets.refuse_forbidden(value)
        return value


class EventTypesField(serializers.ListField):
    def __init__(self, **kwargs):
        super().__init__(child=serializers.ChoiceField(choices=WebhookEventType.choices), min_length=1, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("Must be a list of event types.")
        # Naming a type twice subscribes to it once (the schema cannot forbid repeats).
        return list(dict.fromkeys(super().to_internal_value(data)))


class EndpointCreateSerializer(StrictSerializer):
    url = EndpointUrlField()
    eventTypes = EventTypesField()
    active = StrictBooleanField(required=False, default=True)


class EndpointUpdateSerializer(StrictSerializer):
    url = EndpointUrlField(required=False)
    eventTypes = EventTypesField(required=False)
    active = StrictBooleanField(required=False)

    def changes(self) -> dict:
        names = {"url": "url", "eventTypes": "event_types", "active": "active"}
        return {names[field]: value for field, value in self.validated_data.items()}


# --- outputs ---------------------------------------------------------------------------------------


class EndpointSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    eventTypes = serializers.ListField(child=serializers.ChoiceField(choices=WebhookEventType.choices))
    active = serializers.BooleanField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class CreatedEndpointSerializer(EndpointSerializer):
    secret = serializers.CharField(
        help_text="Signs every delivery (docs/api.md 'Webhooks'). Shown only in this response: keep it."
    )


class EndpointListSerializer(serializers.Serializer):
    endpoints = EndpointSerializer(many=True)


class EndpointDeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()


class DeliverySerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="Sent as Impo-Webhook-Id with every attempt: the same for all of them.")
    eventType = serializers.ChoiceField(choices=WebhookEventType.choices)
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    nextAttemptAt = serializers.DateTimeField(allow_null=True)
    lastAttemptAt = serializers.DateTimeField(allow_null=True)
    lastResponseCode = serializers.IntegerField(allow_null=True)
    lastError = serializers.CharField(
        allow_blank=True,
        help_text='Of the last attempt: "connection failed", "timed out", "HTTP <status>" or "target forbidden".',
    )
    deliveredAt = serializers.DateTimeField(allow_null=True)
    createdAt = serializers.DateTimeField()


class DeliveryListSerializer(serializers.Serializer):
    deliveries = DeliverySerializer(many=True)
