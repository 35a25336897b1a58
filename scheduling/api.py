"""ICA v1 REST endpoints for scheduled tasks (docs/design.md §7): thin, validation at the edge, work in services."""

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import validated
from core.views import IcaAPIView
from scheduling import selectors, services
from scheduling.serializers import (
    PlanCreateSerializer,
    PlanDeletedSerializer,
    PlanDeleteSerializer,
    PlanListSerializer,
    PlanRunsPageSerializer,
    PlanSerializer,
    PlanUpdateSerializer,
    RunsQuerySerializer,
)

_plan_id = extend_schema(parameters=[OpenApiParameter("plan_id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
# A schedule the service refuses (one the body's own validation passed).
SCHEDULE_REFUSALS = (ErrorCode.INVALID_TASK_SCHEDULE, ErrorCode.SCHEDULE_IN_PAST)


class PlansView(IcaAPIView):
    @extend_schema(operation_id="v1_scheduled_tasks_list", responses=responses({200: PlanListSerializer}))
    def get(self, request):
        plans = selectors.live_plans_for_owner(request.user)
        return Response({"schedules": [selectors.plan_to_wire(plan) for plan in plans]})

    @extend_schema(
        request=PlanCreateSerializer,
        responses=responses(
            {201: PlanSerializer},
            *SCHEDULE_REFUSALS,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            ErrorCode.SCHEDULE_LIMIT_REACHED,
            ErrorCode.SCHEDULE_DELETED,
            *WRITE_ERRORS,
        ),
    )
    def post(self, request):
        serializer = validated(PlanCreateSerializer, request.data)
        plan = services.create_plan(
            owner=request.user,
            client_request_id=serializer.validated_data["clientRequestId"],
            command=serializer.to_command(),
        )
        return Response(selectors.plan_to_wire(plan), status=201)


@_plan_id
class PlanView(IcaAPIView):
    @extend_schema(responses=responses({200: PlanSerializer}, 404))
    def get(self, request, plan_id: uuid.UUID):
        return Response(selectors.plan_to_wire(selectors.plan_for_owner(request.user, plan_id)))

    @extend_schema(
        request=PlanUpdateSerializer,
        responses=responses(
            {200: PlanSerializer},
            404,
            *SCHEDULE_REFUSALS,
            ErrorCode.SCHEDULE_CHANGED,
            ErrorCode.SCHEDULE_DELETED,
            *WRITE_ERRORS,
        ),
    )
    def put(self, request, plan_id: uuid.UUID):
        serializer = validated(PlanUpdateSerializer, request.data)
        plan = services.update_plan(
            owner=request.user,
            plan_id=plan_id,
            revision=serializer.validated_data["revision"],
            command=serializer.to_command(),
        )
        return Response(selectors.plan_to_wire(plan))

    @extend_schema(
        request=PlanDeleteSerializer,
        responses=responses({200: PlanDeletedSerializer}, 404, ErrorCode.SCHEDULE_CHANGED, *WRITE_ERRORS),
    )
    def delete(self, request, plan_id: uuid.UUID):
        revision = validated(PlanDeleteSerializer, request.data).validated_data["revision"]
        services.delete_plan(owner=request.user, plan_id=plan_id, revision=revision)
        return Response({"deleted": True})


@_plan_id
class PlanOccurrencesView(IcaAPIView):
    query_serializer = RunsQuerySerializer

    @extend_schema(
        parameters=[RunsQuerySerializer],
        responses=responses({200: PlanRunsPageSerializer}, ErrorCode.INVALID_CURSOR, 404),
    )
    def get(self, request, plan_id: uuid.UUID):
        plan = selectors.plan_for_owner(request.user, plan_id)
        return Response(selectors.occurrences_page(plan, before=self.query.get("before")))
