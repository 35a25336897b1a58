"""`/api/v1/webhooks`: the caller's own webhook endpoints and their recent deliveries. Thin; work in services."""

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import validated
from core.views import IcaAPIView
from webhooks import selectors, services
from webhooks.serializers import (
    CreatedEndpointSerializer,
    DeliveryListSerializer,
    EndpointCreateSerializer,
    EndpointDeletedSerializer,
    EndpointListSerializer,
    EndpointSerializer,
    EndpointUpdateSerializer,
)

_endpoint_id = extend_schema(parameters=[OpenApiParameter("endpoint_id", OpenApiTypes.UUID, OpenApiParameter.PATH)])


class WebhookEndpointsView(IcaAPIView):
    @extend_schema(operation_id="v1_webhooks_list", responses=responses({200: EndpointListSerializer}))
    def get(self, request):
        endpoints = selectors.endpoints_for_owner(request.user)
        return Response({"endpoints": [selectors.endpoint_to_wire(endpoint) for endpoint in endpoints]})

    @extend_schema(
        request=EndpointCreateSerializer,
        responses=responses(
            {201: CreatedEndpointSerializer},
            ErrorCode.WEBHOOK_TARGET_FORBIDDEN,
            ErrorCode.WEBHOOK_LIMIT_REACHED,
            *WRITE_ERRORS,
        ),
    )
    def post(self, request):
        data = validated(EndpointCreateSerializer, request.data).validated_data
        endpoint = services.create_endpoint(
            owner=request.user, url=data["url"], event_types=data["eventTypes"], active=data["active"]
        )
        return Response(selectors.endpoint_to_wire(endpoint, with_secret=True), status=201)


@_endpoint_id
class WebhookEndpointView(IcaAPIView):
    @extend_schema(responses=responses({200: EndpointSerializer}, 404))
    def get(self, request, endpoint_id: uuid.UUID):
        return Response(selectors.endpoint_to_wire(selectors.endpoint_for_owner(request.user, endpoint_id)))

    @extend_schema(
        request=EndpointUpdateSerializer,
        responses=responses({200: EndpointSerializer}, 404, ErrorCode.WEBHOOK_TARGET_FORBIDDEN, *WRITE_ERRORS),
    )
    def patch(self, request, endpoint_id: uuid.UUID):
        changes = validated(EndpointUpdateSerializer, request.data).changes()
        endpoint = services.update_endpoint(owner=request.user, endpoint_id=endpoint_id, changes=changes)
        return Response(selectors.endpoint_to_wire(endpoint))

    @extend_schema(request=None, responses=responses({200: EndpointDeletedSerializer}, 404, 503))
    def delete(self, request, endpoint_id: uuid.UUID):
        services.delete_endpoint(owner=request.user, endpoint_id=endpoint_id)
        return Response({"deleted": True})


@_endpoint_id
class WebhookDeliveriesView(IcaAPIView):
    @extend_schema(responses=responses({200: DeliveryListSerializer}, 404))
    def get(self, request, endpoint_id: uuid.UUID):
        endpoint = selectors.endpoint_for_owner(request.user, endpoint_id)
        deliveries = selectors.recent_deliveries(endpoint)
        return Response({"deliveries": [selectors.delivery_to_wire(delivery) for delivery in deliveries]})
