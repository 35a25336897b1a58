"""Boundary validation and output shapes of the webhooks and Web Push APIs."""

import base64
import binascii
import re

from cryptography.hazmat.primitives.asymmetric import ec
from django.core.validators import URLValidator
from rest_framework import serializers

from core.serializers import CleanTextField, StrictBooleanField, StrictSerializer
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


# --- Web Push --------------------------------------------------------------------------------------------

_BASE64URL = re.compile(r"^[A-Za-z0-9_-]+={0,2}$")
# The last millisecond of year 9999: a later one is no date Python can hold.
MAX_EXPIRATION_MS = 253402300799999


class Base64UrlKeyField(CleanTextField):
    """Key material in base64url (padded or not) of an exact length in bytes; kept unpadded."""

    def __init__(self, *, length: int, **kwargs):
        self.length = length
        super().__init__(max_length=2 * length + 4, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not _BASE64URL.match(value):
            raise serializers.ValidationError("Must be base64url.")
        unpadded = value.rstrip("=")
        try:
            raw = base64.urlsafe_b64decode(unpadded + "=" * (-len(unpadded) % 4))
        except (binascii.Error, ValueError) as exc:
            raise serializers.ValidationError("Must be base64url.") from exc
        if len(raw) != self.length:
            raise serializers.ValidationError(f"Must decode to {self.length} bytes.")
        self.check_key(raw)
        return unpadded

    def check_key(self, raw: bytes) -> None:
        """Refuses raw bytes that are no key of this kind."""


class P256PublicKeyField(Base64UrlKeyField):
    """The browser's ECDH public key (RFC 8291 `p256dh`): an uncompressed point on P-256."""

    def __init__(self, **kwargs):
        super().__init__(length=65, **kwargs)

    def check_key(self, raw: bytes) -> None:
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
        except ValueError as exc:
            raise serializers.ValidationError("Must be an uncompressed P-256 public key.") from exc


class ExpirationTimeField(serializers.IntegerField):
    """`expirationTime` as the browser gives it: null, or milliseconds since the epoch (a JSON number)."""

    def __init__(self, **kwargs):
        super().__init__(
            min_value=0, max_value=MAX_EXPIRATION_MS, allow_null=True, required=False, default=None, **kwargs
        )

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float) or data != int(data):
            raise serializers.ValidationError("Must be null or a whole number of milliseconds.")
        return super().to_internal_value(int(data))


class PushKeysSerializer(StrictSerializer):
    p256dh = P256PublicKeyField()
    auth = Base64UrlKeyField(length=16, help_text="The subscription's auth secret (16 bytes, RFC 8291).")


class PushSubscriptionCreateSerializer(StrictSerializer):
    """The browser's own `PushSubscription.toJSON()`."""

    endpoint = EndpointUrlField(help_text="The push service's URL for this browser: https, on a public address.")
    expirationTime = ExpirationTimeField()
    keys = PushKeysSerializer()


class PushSubscriptionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    endpoint = serializers.CharField()
    expiresAt = serializers.DateTimeField(allow_null=True)
    createdAt = serializers.DateTimeField()


class PushSubscriptionListSerializer(serializers.Serializer):
    vapidPublicKey = serializers.CharField(
        allow_null=True,
        help_text="The server's VAPID public key for `pushManager.subscribe` (base64url of the uncompressed P-256"
        " point); null when push is not configured on this server.",
    )
    subscriptions = PushSubscriptionSerializer(many=True)


class PushSubscriptionDeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()


class NotificationKindsSerializer(StrictSerializer):
    completed = StrictBooleanField(required=False, help_text="A reply finished.")
    failed = StrictBooleanField(required=False, help_text="A reply failed.")
    cancelled = StrictBooleanField(required=False, help_text="A reply was cancelled by someone else (staff).")
    approval = StrictBooleanField(required=False, help_text="A tool call waits for your approval.")
    reconciliation = StrictBooleanField(required=False, help_text="A reply is held while the provider is checked.")


class NotificationPreferencesUpdateSerializer(StrictSerializer):
    kinds = NotificationKindsSerializer(help_text="Each kind named is turned on or off; a kind not named is kept.")


class NotificationPreferencesSerializer(serializers.Serializer):
    kinds = serializers.DictField(child=serializers.BooleanField(), help_text="Every kind, on (true) or off.")
