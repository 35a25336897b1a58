"""Read paths of tools: the catalog a run is offered, and the device bridge's views. Owner-scoped."""

import uuid

from django.utils import timezone

from core.error_codes import ErrorCode
from core.errors import NotFound
from runtime.models import Run, Submission
from tools.models import (
    OPEN_INVOCATION_STATUSES,
    ApprovalStatus,
    Device,
    DeviceInvocation,
    ToolApproval,
    ToolCall,
    ToolCallState,
    ToolReceipt,
)
from tools.registry import ToolDefinition, registry


def device_for_submission(submission: Submission, *, tool_name: str | None = None) -> Device | None:
    """The owner's registered device the message came from, if it can run `tool_name`."""
    if submission.device_id is None:
        return None
    device = Device.objects.filter(id=submission.device_id, owner_id=submission.owner_id).first()
    if device is None or (tool_name is not None and tool_name not in device.tools):
        return None
    return device


def catalog_for_run(run: Run) -> list[ToolDefinition]:
    """What this run's turn is offered: its context's tools, device tools only with a capable device."""
    device = device_for_submission(run.submission)
    return registry.catalog(run.submission.conversation.kind, device_tools=device.tools if device else ())


def offered_tool(run: Run, name: str) -> ToolDefinition | None:
    return next((tool for tool in catalog_for_run(run) if tool.name == name), None)


def device_for_owner(owner, device_id: uuid.UUID) -> Device:
    device = Device.objects.filter(id=device_id, owner=owner).first()
    if device is None:
        raise NotFound("No such device.")
    return device


def open_invocations(device: Device) -> list[DeviceInvocation]:
    """Pending and claimed-but-unfinished invocations still inside their deadline, oldest first.

    A cancelled run's invocations leave the list as soon as the cancel is asked for, before its worker
    ends them.
    """
    return list(
        DeviceInvocation.objects.filter(
            device=device,
            status__in=OPEN_INVOCATION_STATUSES,
            expires_at__gt=timezone.now(),
            tool_call__run__cancel_requested_at__isnull=True,
        )
        .select_related("tool_call")
        .order_by("created_at")
    )


def invocation_to_wire(invocation: DeviceInvocation) -> dict:
    return {
        "invocationId": str(invocation.id),
        "toolCallId": invocation.tool_call.call_id,
        "deviceId": str(invocation.device_id),
        "expiresAt": invocation.expires_at.isoformat(),
        "toolName": invocation.tool_call.tool_name,
        "input": invocation.tool_call.arguments,
        "status": invocation.status,
        "executionId": str(invocation.execution_id) if invocation.execution_id else None,
    }


def has_pending_approval(run: Run) -> bool:
    return ToolApproval.objects.filter(tool_call__run=run, status=ApprovalStatus.PENDING).exists()


def runs_with_expired_approvals(now):
    """Ids of runs with a call still awaiting an answer past its deadline (a subquery)."""
    return ToolApproval.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now).values("tool_call__run_id")


def approval_to_wire(approval: ToolApproval) -> dict:
    call = approval.tool_call
    return {
        "approvalId": str(call.id),
        "toolCallId": call.call_id,
        "toolName": call.tool_name,
        "status": approval.status,
        "outcome": approval.outcome,
        "input": call.arguments,
        "reason": approval.reason,
        "clientDecisionId": approval.client_decision_id,
        "decidedAt": approval.decided_at.isoformat(),
    }


# The client's words for a call's execution state: the same as the `tool.*` events' (docs/design.md §4).
_WIRE_TOOL_STATE = {
    ToolCallState.REQUESTED: "requested",
    ToolCallState.AWAITING_APPROVAL: "awaiting_approval",
    ToolCallState.APPROVED: "requested",
    ToolCallState.DISPATCHED: "requested",
    ToolCallState.ACCEPTED: "accepted",
    ToolCallState.SUCCEEDED: "completed",
    ToolCallState.FAILED: "failed",
    ToolCallState.UNCERTAIN: "uncertain",
}


def staff_finding(succeeded: bool, note: str) -> dict:
    """What a staff member found about an uncertain call, shaped like a result."""
    if succeeded:
        return {"output": {"reconciled": True, "note": note}}
    return {"error": {"code": ErrorCode.RECONCILED_FAILED, "message": note}}


def tool_states_by_assistant_message(message_ids) -> dict[uuid.UUID, list[dict]]:
    """Each assistant message's tool calls with their execution state, for a history page to rebuild."""
    calls = (
        ToolCall.objects.filter(run__submission__assistant_message_id__in=message_ids)
        .values(
            "run__submission__assistant_message_id",
            "id",
            "approval__status",
            "approval__outcome",
            "approval__expires_at",
            "call_id",
            "tool_name",
            "state",
            "error_code",
            "arguments",
            "raw_arguments",
            "receipt__result",
            "resolved_at",
            "resolution_note",
        )
        .order_by("created_at")
    )
    states: dict[uuid.UUID, list[dict]] = {}
    for call in calls:
        result = call["receipt__result"] or {}
        if call["resolved_at"] is not None:
            # Staff's finding replaces the unknown outcome the agent was told about.
            result = staff_finding(call["state"] == ToolCallState.SUCCEEDED, call["resolution_note"])
        error = result.get("error") or {}
        error_code = error.get("code") if call["resolved_at"] is not None else call["error_code"] or error.get("code")
        states.setdefault(call["run__submission__assistant_message_id"], []).append(
            {
                "toolCallId": call["call_id"],
                "toolName": call["tool_name"],
                "state": _WIRE_TOOL_STATE[call["state"]],
                "errorCode": error_code or None,
                # What the live events carried, so a reload shows the same call: its input, and its
                # output or error message once a result was saved.
                "input": call["arguments"] if call["arguments"] is not None else call["raw_arguments"],
                "output": result.get("output"),
                "errorMessage": error.get("message"),
                # Asked for approval: its state, so any device (or a reload) can show or give the answer.
                "approval": (
                    {
                        "approvalId": str(call["id"]),
                        "status": call["approval__status"],
                        "outcome": call["approval__outcome"] or None,
                        "expiresAt": call["approval__expires_at"].isoformat(),
                    }
                    if call["approval__status"]
                    else None
                ),
            }
        )
    return states


def receipts_by_assistant_message(message_ids) -> dict[uuid.UUID, list[dict]]:
    """Each assistant message's tool receipts: the results saved for its calls, as they were sent to the agent."""
    receipts = (
        ToolReceipt.objects.filter(tool_call__run__submission__assistant_message_id__in=message_ids)
        .values("tool_call__run__submission__assistant_message_id", "tool_call__call_id", "result", "created_at")
        .order_by("created_at")
    )
    by_message: dict[uuid.UUID, list[dict]] = {}
    for receipt in receipts:
        by_message.setdefault(receipt["tool_call__run__submission__assistant_message_id"], []).append(
            {
                "toolCallId": receipt["tool_call__call_id"],
                "result": receipt["result"],
                "createdAt": receipt["created_at"].isoformat(),
            }
        )
    return by_message


def invocation_traceparent(invocation_id) -> str:
    """The trace context the invocation was created in ('' for none, or no such invocation)."""
    return DeviceInvocation.objects.filter(id=invocation_id).values_list("traceparent", flat=True).first() or ""
