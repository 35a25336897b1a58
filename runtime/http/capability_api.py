"""`POST /api/v1/approvals/decide`: a notification's Approve or Deny, sent by the service worker without a page
(docs/notifications.md "Approve or deny from the notification").

No session and no token: the single-use capability in the body, which only the owner's browser has (it came
inside a push encrypted to that browser), is the authority. So the view takes no authentication, and with it no
CSRF check: CSRF guards against a cross-site page riding on the browser's cookies, and this route reads none; a
page that does not hold the capability cannot forge a request here, and one that holds it needs no cookie.
"""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.openapi import WRITE_ERRORS, responses
from core.serializers import validated
from core.views import IcaAPIView
from runtime.services import commands
from tools import capabilities
from tools.serializers import ApprovalCapabilityAnswerSerializer, ApprovalDecidedByCapabilitySerializer


class ApprovalCapabilityDecisionView(IcaAPIView):
    authentication_classes = ()
    permission_classes = ()

    @extend_schema(
        operation_id="v1_approvals_decide",
        request=ApprovalCapabilityAnswerSerializer,
        responses=responses(
            {200: ApprovalDecidedByCapabilitySerializer},
            404,
            ErrorCode.CAPABILITY_USED,
            ErrorCode.CAPABILITY_EXPIRED,
            ErrorCode.APPROVAL_CANCELLED,
            *WRITE_ERRORS,
        ),
        description="Approve or deny a tool call with a notification's single-use capability (no session: the"
        " capability is the authority). The decision is the page's own (`POST /tool-calls/{approvalId}/approval`);"
        " the answer names it and nothing of the call."
        " A capability used already, or whose approval was decided another way (the other action's included), is"
        " 409 `capability_used`; one past the approval's deadline 410 `capability_expired`; an unknown one, or one"
        " bound to another approval or decision, 404. Nothing changes on a refusal.",
    )
    def post(self, request):
        body = validated(ApprovalCapabilityAnswerSerializer, request.data).validated_data
        capability = capabilities.capability_for(
            token=body["capability"], approval_id=body["approvalId"], decision=body["decision"]
        )
        approval, _ = commands.answer_tool_approval(
            owner=capability.approval.tool_call.run.owner,
            tool_call_id=capability.approval_id,
            answer=capabilities.answer_of(capability),
            capability=capability,
        )
        # The decision only: the tool's arguments stay with the signed-in pages.
        return Response(
            {
                "approvalId": str(approval.tool_call_id),
                "status": approval.status,
                "outcome": approval.outcome,
                "decidedAt": approval.decided_at.isoformat(),
            }
        )
