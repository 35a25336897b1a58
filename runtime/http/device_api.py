"""ICA v1 device bridge (docs/design.md §4): thin views, validation at the edge, work in services.

In runtime, not tools: each write locks the invocation's run and projects events (`runtime.services.devices`).
"""

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import validated
from core.views import IcaAPIView
from runtime.services import devices
from tools import selectors
from tools.serializers import (
    DeviceRegisteredSerializer,
    DeviceRegistrationSerializer,
    InvocationClaimedSerializer,
    InvocationClaimSerializer,
    InvocationListSerializer,
    InvocationQuerySerializer,
    InvocationResultAcceptedSerializer,
    InvocationResultSerializer,
)

# Why an invocation can no longer be claimed or answered.
INVOCATION_GONE = (ErrorCode.INVOCATION_EXPIRED, ErrorCode.INVOCATION_CANCELLED, ErrorCode.PERMISSION_REVOKED)


class DeviceRegisterView(IcaAPIView):
    @extend_schema(
        request=DeviceRegistrationSerializer,
        responses=responses({200: DeviceRegisteredSerializer}, ErrorCode.REGISTRATION_CONFLICT, *WRITE_ERRORS),
    )
    def post(self, request):
        data = validated(DeviceRegistrationSerializer, request.data).validated_data
        device = devices.register_device(
            owner=request.user, installation_id=data["installationId"], tools=data["tools"]
        )
        return Response({"deviceId": str(device.id)})


class DeviceInvocationsView(IcaAPIView):
    query_serializer = InvocationQuerySerializer

    @extend_schema(
        parameters=[InvocationQuerySerializer], responses=responses({200: InvocationListSerializer}, 400, 404)
    )
    def get(self, request, device_id: uuid.UUID):
        device = selectors.device_for_owner(request.user, device_id)
        invocations = selectors.open_invocations(device)
        return Response({"invocations": [selectors.invocation_to_wire(invocation) for invocation in invocations]})


class InvocationClaimView(IcaAPIView):
    @extend_schema(
        request=InvocationClaimSerializer,
        responses=responses({200: InvocationClaimedSerializer}, 404, *INVOCATION_GONE, *WRITE_ERRORS),
    )
    def post(self, request, invocation_id: uuid.UUID):
        data = validated(InvocationClaimSerializer, request.data).validated_data
        invocation = devices.claim_invocation(
            owner=request.user, invocation_id=invocation_id, device_id=data["deviceId"]
        )
        return Response({"executionId": str(invocation.execution_id), "expiresAt": invocation.expires_at.isoformat()})


class InvocationResultView(IcaAPIView):
    @extend_schema(
        request=InvocationResultSerializer,
        responses=responses(
            {200: InvocationResultAcceptedSerializer},
            404,
            ErrorCode.EXECUTION_MISMATCH,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.INVOCATION_NOT_CLAIMED,
            *INVOCATION_GONE,
            *WRITE_ERRORS,
        ),
    )
    def post(self, request, invocation_id: uuid.UUID):
        serializer = validated(InvocationResultSerializer, request.data)
        duplicate = devices.complete_invocation(
            owner=request.user,
            invocation_id=invocation_id,
            device_id=serializer.validated_data["deviceId"],
            execution_id=serializer.validated_data["executionId"],
            report=serializer.report(),
        )
        return Response({"accepted": True, "duplicate": duplicate})
