"""`DELETE /api/v1/account`, `POST /api/v1/account/password-check`, `GET`/`PUT /api/v1/account/instructions`,
`GET /api/v1/export` and the account's standing tool permissions (`/api/v1/account/tool-permissions`): thin views
over the accounts' and tools' services and selectors (the instructions are the agent's:
`rebyte.owner_instructions`)."""

from collections.abc import AsyncIterator

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from accounts import selectors, services
from accounts.serializers import (
    AccountDeletedSerializer,
    AccountDeleteSerializer,
    ExportSerializer,
    InstructionsSerializer,
    InstructionsUpdateSerializer,
    PasswordCheckedSerializer,
    ToolPermissionRevokedSerializer,
    ToolPermissionsSerializer,
)
from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import validated
from core.views import IcaAPIView
from rebyte import owner_instructions
from tools import permissions


class AccountView(IcaAPIView):
    @extend_schema(
        request=AccountDeleteSerializer,
        responses=responses({202: AccountDeletedSerializer}, ErrorCode.PASSWORD_INCORRECT, 429, *WRITE_ERRORS),
        description="Deletes the account, confirmed with its password (a token alone cannot): from the answer on no"
        " session or token signs in as it; every conversation (and its sessions at the agent provider), the agent,"
        " tokens, webhooks, push subscriptions and schedules go in the background. Wrong passwords count with the"
        " login form's failures.",
    )
    def delete(self, request):
        password = validated(AccountDeleteSerializer, request.data).validated_data["password"]
        services.delete_account(user=request.user, password=password, address=request.META.get("REMOTE_ADDR", ""))
        return Response({"deleted": True}, status=202)


class PasswordCheckView(IcaAPIView):
    @extend_schema(
        request=AccountDeleteSerializer,
        responses=responses({200: PasswordCheckedSerializer}, ErrorCode.PASSWORD_INCORRECT, 429, *WRITE_ERRORS),
        description="Checks the account's password and changes nothing: the account page asks it before its"
        ' "Delete for good?", so a wrong password is said before the question. Wrong passwords count with the'
        " login form's failures.",
    )
    def post(self, request):
        password = validated(AccountDeleteSerializer, request.data).validated_data["password"]
        services.check_password(user=request.user, password=password, address=request.META.get("REMOTE_ADDR", ""))
        return Response({"passwordCorrect": True})


class InstructionsView(IcaAPIView):
    @extend_schema(responses=responses({200: InstructionsSerializer}))
    def get(self, request):
        return Response(selectors.instructions_to_wire(request.user.pk))

    @extend_schema(
        request=InstructionsUpdateSerializer,
        responses=responses({200: InstructionsSerializer}, *WRITE_ERRORS),
        description="Replaces your standing instructions to the agent (blank: none). They apply from your next"
        " message on, in Main Chat and every Task: a reply already under way keeps the instructions it started"
        " with. The same text again changes nothing. Longer than `maxLength` (after trimming) is 400"
        " `invalid_request`.",
    )
    def put(self, request):
        text = validated(InstructionsUpdateSerializer, request.data).validated_data["text"]
        owner_instructions.set_instructions(request.user, text)
        return Response(selectors.instructions_to_wire(request.user.pk))


async def _encoded(pieces: AsyncIterator[str]) -> AsyncIterator[bytes]:
    async for piece in pieces:
        if piece:
            yield piece.encode()


class ExportView(IcaAPIView):
    @extend_schema(
        responses=responses(
            {
                200: OpenApiResponse(
                    ExportSerializer,
                    description="One JSON document, streamed as it is read (an attachment). See"
                    " docs/data-lifecycle.md.",
                )
            }
        )
    )
    def get(self, request):
        response = StreamingHttpResponse(_encoded(selectors.document(request.user)), content_type="application/json")
        stamp = timezone.now().strftime("%Y%m%d")
        response["Content-Disposition"] = f'attachment; filename="impo-export-{stamp}.json"'
        response["Cache-Control"] = "no-store"
        return response


class ToolPermissionsView(IcaAPIView):
    @extend_schema(
        responses=responses({200: ToolPermissionsSerializer}),
        description='The tools the owner always allows ("Always allow for this tool" on an approval): their calls'
        " run without asking until revoked.",
    )
    def get(self, request):
        return Response({"toolPermissions": permissions.permissions_to_wire(request.user.id)})


class ToolPermissionView(IcaAPIView):
    name_kwargs = ("tool_name",)

    @extend_schema(
        request=None,
        parameters=[
            OpenApiParameter(
                "tool_name",
                str,
                OpenApiParameter.PATH,
                pattern=f"^{permissions.TOOL_NAME.pattern}$",
                description="The tool's name, as `toolName` in the list.",
            )
        ],
        responses=responses({200: ToolPermissionRevokedSerializer}, 404, 503),
        description="Revokes the owner's standing permission for the tool: its next call is asked again.",
    )
    def delete(self, request, tool_name: str):
        permissions.revoke(request.user, tool_name)
        return Response({"revoked": True})
