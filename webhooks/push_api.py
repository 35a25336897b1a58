"""`/api/v1/push-subscriptions` and `/api/v1/notification-preferences`: the caller's browsers registered for Web
Push and the kinds of notification they want (docs/design.md §10). Thin; work in push_services."""

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import validated
from core.views import IcaAPIView
from webhooks import push, push_services, selectors
from webhooks.serializers import (
    NotificationPreferencesSerializer,
    NotificationPreferencesUpdateSerializer,
    PushSubscriptionCreateSerializer,
    PushSubscriptionDeletedSerializer,
    PushSubscriptionListSerializer,
    PushSubscriptionSerializer,
)


class PushSubscriptionsView(IcaAPIView):
    @extend_schema(
        operation_id="v1_push_subscriptions_list", responses=responses({200: PushSubscriptionListSerializer})
    )
    def get(self, request):
        subscriptions = selectors.push_subscriptions_for_owner(request.user)
        return Response(
            {
                "vapidPublicKey": push.vapid_public_key(),
                "subscriptions": [selectors.push_subscription_to_wire(each) for each in subscriptions],
            }
        )

    @extend_schema(
        request=PushSubscriptionCreateSerializer,
        responses=responses(
            {201: PushSubscriptionSerializer},
            ErrorCode.WEBHOOK_TARGET_FORBIDDEN,
            ErrorCode.PUSH_SUBSCRIPTION_LIMIT_REACHED,
            ErrorCode.PUSH_ENDPOINT_TAKEN,
            *WRITE_ERRORS,
        ),
        description="Registers this browser (idempotent per endpoint: the same endpoint again answers the same"
        " subscription, its keys updated). An endpoint another account registered moves to the caller only with"
        " the same keys (`p256dh`, `auth`); with other keys it is 409 `push_endpoint_taken`.",
    )
    def post(self, request):
        data = validated(PushSubscriptionCreateSerializer, request.data).validated_data
        subscription, _ = push_services.register_subscription(
            owner=request.user,
            endpoint=data["endpoint"],
            p256dh=data["keys"]["p256dh"],
            auth=data["keys"]["auth"],
            expiration_ms=data["expirationTime"],
        )
        return Response(selectors.push_subscription_to_wire(subscription), status=201)


@extend_schema(parameters=[OpenApiParameter("subscription_id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class PushSubscriptionView(IcaAPIView):
    @extend_schema(request=None, responses=responses({200: PushSubscriptionDeletedSerializer}, 404, 503))
    def delete(self, request, subscription_id: uuid.UUID):
        push_services.delete_subscription(owner=request.user, subscription_id=subscription_id)
        return Response({"deleted": True})


class NotificationPreferencesView(IcaAPIView):
    @extend_schema(responses=responses({200: NotificationPreferencesSerializer}))
    def get(self, request):
        return Response(selectors.preferences_to_wire(request.user))

    @extend_schema(
        request=NotificationPreferencesUpdateSerializer,
        responses=responses({200: NotificationPreferencesSerializer}, *WRITE_ERRORS),
    )
    def put(self, request):
        kinds = validated(NotificationPreferencesUpdateSerializer, request.data).validated_data["kinds"]
        push_services.update_preferences(owner=request.user, kinds=kinds)
        return Response(selectors.preferences_to_wire(request.user))
