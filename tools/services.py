"""Write paths of tool calls, inside a transaction in which the caller (runtime) holds the call's run locked.

Lock order, everywhere: a Run row, then its ToolCall / DeviceInvocation rows, then (through the event
log) its Conversation row. Every function here takes the run its caller locked (a model, or the read-only view a
fenced block holds) and joins the caller's transaction; none changes the run itself (its states belong to
runtime), and none writes the event log: what a client should see is returned as events, `(type, payload)`
pairs, which the caller appends in the same transaction.
"""

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from impo import telemetry
from impo.error_codes import ErrorCode
from impo.errors import Conflict, Gone, InvalidRequest, NotFound
from runtime.models import EventType, Run
from tools.models import (
    OPEN_INVOCATION_STATUSES,
    ApprovalOutcome,
    ApprovalStatus,
    Device,
    DeviceInvocation,
    InvocationStatus,
    ToolApproval,
    ToolCall,
    ToolCallState,
    ToolReceipt,
)
from tools.registry import ToolDefinition, registry
from tools.selectors import device_for_submission, offered_tool, staff_finding


def tool_result_text(result: dict) -> str:
    """The receipt as the agent reads it: the output as canonical JSON, or `code: message` for an error.

    Canonical, so a resend is byte-for-byte the same and the provider's idempotency check accepts it.
    """
    if "error" in result:
        return f"{result['error']['code']}: {result['error']['message']}"
    return json.dumps(result["output"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def error_result(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


# What a client should see of a change, for the caller to append to the run's conversation.
Events = list[tuple[str, dict]]


def _requested_payload(call: ToolCall) -> dict:
    return {
        "toolCallId": call.call_id,
        "toolName": call.tool_name,
        "input": call.arguments if call.arguments is not None else call.raw_arguments,
        "sideEffect": call.side_effect,
    }


def _completed_payload(call: ToolCall, result: dict) -> dict:
    payload = {"toolCallId": call.call_id, "toolName": call.tool_name}
    if "error" in result:
        payload["error"] = result["error"]
    else:
        payload["output"] = result["output"]
    return payload


def save_receipt(call: ToolCall, result: dict) -> tuple[ToolReceipt, Events]:
    """Settles a locked call with its durable result; the caller's transaction commits it with its event."""
    receipt = ToolReceipt.objects.create(tool_call=call, result=result)
    call.transition_to(ToolCallState.FAILED if "error" in result else ToolCallState.SUCCEEDED)
    call.error_code = result["error"]["code"] if "error" in result else ""
    call.save(update_fields=["state", "error_code", "updated_at"])
    return receipt, [(EventType.TOOL_COMPLETED, _completed_payload(call, result))]


def _parse_arguments(raw) -> dict | None:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return None
    return parsed if isinstance(parsed, dict) else None


def locked_call(run: Run, call_id: str) -> ToolCall:
    return ToolCall.objects.select_for_update().get(run_id=run.id, call_id=call_id)


# --- worker side, inside the run's fenced transaction ---------------------------------------------------


def _call_attributes(run: Run, **arguments) -> dict:
    return {"impo.run.id": run.id, "impo.tool.call_id": arguments["call_id"], "impo.tool.name": arguments["name"]}


@telemetry.traced("impo.tool.record", attributes=_call_attributes)
def record_call(run: Run, *, call_id: str, name: str, arguments) -> tuple[ToolCall, Events]:
    """Records a provider's function call once per run; a redelivery (a successor, a re-read) finds it.

    A call that cannot be dispatched (not offered here, arguments not matching the schema, no device
    to run on) is settled on the spot with an error receipt the agent will read. One that needs its
    owner's approval waits for it (the caller parks the run). A device tool's invocation is created in
    the same transaction as its dispatch (here, or with its approval), so it exists exactly once per call.
    """
    existing = ToolCall.objects.filter(run_id=run.id, call_id=call_id).first()
    if existing is not None:
        return existing, []
    definition = offered_tool(run, name)
    parsed = _parse_arguments(arguments)
    call = ToolCall.objects.create(
        run_id=run.id,
        call_id=call_id,
        tool_name=name,
        side_effect=definition.side_effect if definition else "",
        arguments=parsed,
        raw_arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
    )
    refusal = _refusal(definition, name, parsed)
    device = None
    if refusal is None and definition.device:
        device = device_for_submission(run.submission, tool_name=name)
        if device is None:
            refusal = _no_device(name)
    requested = [(EventType.TOOL_REQUESTED, _requested_payload(call))]
    if refusal is None and definition.requires_approval(parsed):
        # Asked before anything is dispatched; a device call's invocation opens only once it is approved.
        requested.append((EventType.TOOL_APPROVAL_REQUESTED, _ask_approval(call)))
    elif device is not None:
        requested[0][1]["device"] = _open_invocation(call, definition, device)
    if refusal is not None:
        requested += save_receipt(call, refusal)[1]
    return call, requested


def _no_device(name: str) -> dict:
    return error_result(ErrorCode.NO_DEVICE, f"No registered device of this user can run {name}.")


def _open_invocation(call: ToolCall, definition: ToolDefinition, device: Device) -> dict:
    """Hands a device call to its device: the one dispatch an uncertain call ever gets."""
    invocation = DeviceInvocation.objects.create(
        tool_call=call,
        device=device,
        expires_at=timezone.now() + timedelta(seconds=definition.timeout),
        traceparent=telemetry.traceparent(),
    )
    telemetry.annotate({"impo.device_invocation.id": invocation.id, "impo.device.id": device.id})
    call.transition_to(ToolCallState.DISPATCHED)
    call.attempts = 1
    call.save(update_fields=["state", "attempts", "updated_at"])
    return {
        "invocationId": str(invocation.id),
        "deviceId": str(device.id),
        "expiresAt": invocation.expires_at.isoformat(),
    }


def _refusal(definition: ToolDefinition | None, name: str, arguments: dict | None) -> dict | None:
    if definition is None:
        return error_result(ErrorCode.UNKNOWN_TOOL, f"No tool named {name!r} is available here.")
    if arguments is None:
        return error_result(ErrorCode.INVALID_ARGUMENTS, "The arguments must be a JSON object.")
    problem = definition.validation_error(arguments)
    if problem is not None:
        return error_result(ErrorCode.INVALID_ARGUMENTS, problem)
    return None


def mark_dispatched(run: Run, call_id: str) -> ToolCall:
    """Counts an attempt before acting, so a successor knows the call may already have acted."""
    call = locked_call(run, call_id)
    call.transition_to(ToolCallState.DISPATCHED)
    call.attempts += 1
    call.save(update_fields=["state", "attempts", "updated_at"])
    return call


def save_result(run: Run, call_id: str, result: dict) -> tuple[ToolReceipt, Events]:
    return save_receipt(locked_call(run, call_id), result)


def mark_submitted(run: Run, receipt_ids: list[int]) -> None:
    """The provider acknowledged these results (202): a successor need not send them again."""
    ToolReceipt.objects.filter(id__in=receipt_ids, tool_call__run_id=run.id, submitted_at__isnull=True).update(
        submitted_at=timezone.now()
    )


def _locked_invocation_of_call(run: Run, call_id: str) -> DeviceInvocation:
    return (
        DeviceInvocation.objects.select_for_update(of=("self",))
        .select_related("tool_call")
        .get(tool_call__run_id=run.id, tool_call__call_id=call_id)
    )


def _make_uncertain(call: ToolCall, code: str, message: str) -> tuple[ToolReceipt, Events]:
    """A call whose device may or may not have acted: never retried, listed for staff, the agent told so."""
    call.transition_to(ToolCallState.UNCERTAIN)
    call.error_code = code
    call.save(update_fields=["state", "error_code", "updated_at"])
    receipt = ToolReceipt.objects.create(tool_call=call, result=error_result(code, message))
    payload = {"toolCallId": call.call_id, "toolName": call.tool_name, "code": code, "message": message}
    return receipt, [(EventType.TOOL_UNCERTAIN, payload)]


def end_invocation(
    run: Run, invocation: DeviceInvocation, status: str, code: str, message: str
) -> tuple[ToolReceipt, Events]:
    """Ends an open invocation: one never claimed did not run (an error receipt); a claimed one may have."""
    was_claimed = invocation.status == InvocationStatus.CLAIMED
    invocation.status = status
    invocation.save(update_fields=["status"])
    call = locked_call(run, invocation.tool_call.call_id)
    if was_claimed:
        return _make_uncertain(call, code, message)
    return save_receipt(call, error_result(code, message))


def expire_invocation(run: Run, call_id: str) -> tuple[ToolReceipt | None, Events]:
    """Past the deadline without a result: the call is uncertain and the agent is told so. None if a result won.

    The action may or may not have happened, so it is never retried; the call stays listed for staff to
    reconcile, while the agent gets a `device_timeout` error and the run (and its conversation) goes on.
    """
    invocation = _locked_invocation_of_call(run, call_id)
    if invocation.status not in OPEN_INVOCATION_STATUSES or timezone.now() < invocation.expires_at:
        return None, []
    invocation.status = InvocationStatus.EXPIRED
    invocation.save(update_fields=["status"])
    message = "The device did not report a result before the deadline; the action may or may not have run."
    return _make_uncertain(locked_call(run, call_id), ErrorCode.DEVICE_TIMEOUT, message)


def withdraw_invocation(run: Run, call_id: str) -> tuple[ToolReceipt | None, Events]:
    """On cancellation: the invocation leaves its device's list and refuses results. None if a result won.

    One never claimed did not run; a claimed one may have, so its call becomes uncertain.
    """
    invocation = _locked_invocation_of_call(run, call_id)
    if invocation.status not in OPEN_INVOCATION_STATUSES:
        return None, []
    return end_invocation(
        run, invocation, InvocationStatus.CANCELLED, ErrorCode.INVOCATION_CANCELLED, "The run was cancelled."
    )


# --- approval: a person's answer gates the dispatch (README "Tool approval") --------------------------


@dataclass(frozen=True)
class ApprovalAnswer:
    """The owner's answer as validated at the edge; `arguments` replaces the agent's (an edit) when given."""

    approve: bool
    client_decision_id: str
    arguments: dict | None = None
    reason: str = ""

    def to_record(self) -> dict:
        return {"approve": self.approve, "arguments": self.arguments, "reason": self.reason}


def _ask_approval(call: ToolCall) -> dict:
    approval = ToolApproval.objects.create(
        tool_call=call,
        requested_arguments=call.arguments,
        expires_at=timezone.now() + timedelta(seconds=settings.IMPO_TOOL_APPROVAL_TIMEOUT_SECONDS),
    )
    call.transition_to(ToolCallState.AWAITING_APPROVAL)
    call.save(update_fields=["state", "updated_at"])
    return {
        "toolCallId": call.call_id,
        "toolName": call.tool_name,
        "approvalId": str(call.id),
        "input": call.arguments,
        "expiresAt": approval.expires_at.isoformat(),
    }


def _decided_payload(call: ToolCall, approval: ToolApproval) -> dict:
    return {
        "toolCallId": call.call_id,
        "toolName": call.tool_name,
        "approvalId": str(call.id),
        "decision": approval.status,
        "outcome": approval.outcome,
        "reason": approval.reason,
        "input": call.arguments,
    }


def _record_decision(approval: ToolApproval, status: str, outcome: str, **fields) -> None:
    approval.status = status
    approval.outcome = outcome
    approval.decided_at = timezone.now()
    for name, value in fields.items():
        setattr(approval, name, value)
    approval.save()


def _deny(call: ToolCall, approval: ToolApproval, outcome: str, message: str, **fields) -> Events:
    """The call fails without acting; the agent reads `outcome: message` as the tool's error."""
    _record_decision(approval, ApprovalStatus.DENIED, outcome, **fields)
    decided = [(EventType.TOOL_APPROVAL_DECIDED, _decided_payload(call, approval))]
    return decided + save_receipt(call, error_result(outcome, message))[1]


def _approve(run: Run, call: ToolCall, approval: ToolApproval, answer: ApprovalAnswer, decided_by) -> Events:
    definition = registry.get(call.tool_name)
    arguments = call.arguments if answer.arguments is None else answer.arguments
    problem = definition.validation_error(arguments)
    if problem is not None:
        raise InvalidRequest(f"arguments: {problem}")
    edited = arguments != approval.requested_arguments
    call.arguments = arguments
    call.transition_to(ToolCallState.APPROVED)
    call.save(update_fields=["arguments", "state", "updated_at"])
    _record_decision(
        approval,
        ApprovalStatus.APPROVED,
        ApprovalOutcome.EDITED if edited else ApprovalOutcome.APPROVED,
        client_decision_id=answer.client_decision_id,
        answer=answer.to_record(),
        decided_by=decided_by,
    )
    # A server call is dispatched by the worker woken for the run, under the receipt that guards every call;
    # a device call's one dispatch is its invocation, opened now (or refused if no device can run it any more).
    decided = _decided_payload(call, approval)
    refusal = None
    if definition.device:
        device = device_for_submission(run.submission, tool_name=call.tool_name)
        if device is None:
            refusal = _no_device(call.tool_name)
        else:
            decided["device"] = _open_invocation(call, definition, device)
    events = [(EventType.TOOL_APPROVAL_DECIDED, decided)]
    if refusal is not None:
        events += save_receipt(call, refusal)[1]
    return events


# Why a decided approval takes no answer any more, when no person decided it.
_APPROVAL_GONE = {
    ApprovalOutcome.TIMED_OUT: (ErrorCode.APPROVAL_EXPIRED, "No answer came before this approval's deadline."),
    ApprovalOutcome.CANCELLED: (ErrorCode.APPROVAL_CANCELLED, "The run of this call was cancelled."),
}


def answer_approval(
    run: Run, tool_call_id: uuid.UUID, answer: ApprovalAnswer, *, decided_by
) -> tuple[ToolApproval, bool, Events]:
    """Records the owner's answer for a call of the locked run; returns the approval, whether it was a replay, and
    the events of the decision.

    One decision per call: the same clientDecisionId with the same answer, or another device giving the
    same answer, gets the recorded decision back; a different answer is a 409. A call past its deadline or
    whose run was cancelled is 410, whatever the sweeper has written yet.
    """
    call = ToolCall.objects.select_for_update().get(id=tool_call_id, run_id=run.id)
    approval = ToolApproval.objects.select_for_update().filter(tool_call=call).first()
    if approval is None:
        raise NotFound("No approval is asked for this tool call.")
    if approval.status != ApprovalStatus.PENDING:
        if approval.outcome in _APPROVAL_GONE:
            code, message = _APPROVAL_GONE[approval.outcome]
            raise Gone(message, code=code)
        if approval.client_decision_id == answer.client_decision_id:
            if approval.answer != answer.to_record():
                raise Conflict(
                    "This clientDecisionId was already used for another answer.", code=ErrorCode.IDEMPOTENCY_CONFLICT
                )
            return approval, True, []
        if _same_decision(call, approval, answer):
            return approval, True, []
        raise Conflict("This call was already answered differently.", code=ErrorCode.APPROVAL_CONFLICT)
    if run.cancel_requested_at is not None:
        raise Gone(_APPROVAL_GONE[ApprovalOutcome.CANCELLED][1], code=ErrorCode.APPROVAL_CANCELLED)
    if timezone.now() >= approval.expires_at:
        raise Gone(_APPROVAL_GONE[ApprovalOutcome.TIMED_OUT][1], code=ErrorCode.APPROVAL_EXPIRED)
    if answer.approve:
        return approval, False, _approve(run, call, approval, answer, decided_by)
    message = f"The user denied this call: {answer.reason}" if answer.reason else "The user denied this call."
    events = _deny(
        call,
        approval,
        ApprovalOutcome.DENIED,
        message,
        reason=answer.reason,
        client_decision_id=answer.client_decision_id,
        answer=answer.to_record(),
        decided_by=decided_by,
    )
    return approval, False, events


def _same_decision(call: ToolCall, approval: ToolApproval, answer: ApprovalAnswer) -> bool:
    if not answer.approve:
        return approval.status == ApprovalStatus.DENIED
    arguments = call.arguments if answer.arguments is None else answer.arguments
    return approval.status == ApprovalStatus.APPROVED and arguments == call.arguments


def _pending_approvals(run: Run, **filters):
    return (
        ToolApproval.objects.select_for_update(of=("self", "tool_call"))
        .select_related("tool_call")
        .filter(tool_call__run_id=run.id, status=ApprovalStatus.PENDING, **filters)
        .order_by("created_at")
    )


def deny_for_cancel(run: Run) -> Events:
    """Inside the cancel's transaction (the run locked first): every pending approval of the run is denied."""
    events = []
    for approval in _pending_approvals(run):
        message = "The run was cancelled before this call was approved."
        events += _deny(approval.tool_call, approval, ApprovalOutcome.CANCELLED, message)
    return events


def deny_expired(run: Run) -> tuple[int, Events]:
    """The locked run's approvals past their deadline are denied (the agent reads `approval_timeout`); returns how
    many, with their events."""
    expired = list(_pending_approvals(run, expires_at__lte=timezone.now()))
    events = []
    for approval in expired:
        seconds = (approval.expires_at - approval.created_at).total_seconds()
        message = f"No one approved this call within {seconds:.0f} seconds."
        events += _deny(approval.tool_call, approval, ApprovalOutcome.TIMED_OUT, message)
    return len(expired), events


# --- reconciliation ---------------------------------------------------------------------------------


def record_staff_finding(run: Run, tool_call_id: uuid.UUID, *, succeeded: bool, note: str) -> tuple[ToolCall, Events]:
    """Staff's finding about an uncertain call of the locked run: what really happened, shown to the owner as
    resolved by staff. The agent was already told the outcome was unknown and the run went on."""
    call = ToolCall.objects.select_for_update().get(id=tool_call_id, run_id=run.id)
    if call.state != ToolCallState.UNCERTAIN:
        raise Conflict(f"Tool call {call.call_id} is {call.state}, not uncertain.", code=ErrorCode.NOT_UNCERTAIN)
    call.transition_to(ToolCallState.SUCCEEDED if succeeded else ToolCallState.FAILED)
    call.resolution_note = note
    call.resolved_at = timezone.now()
    call.save(update_fields=["state", "resolution_note", "resolved_at", "updated_at"])
    payload = {**_completed_payload(call, staff_finding(succeeded, note)), "resolvedByStaff": True}
    return call, [(EventType.TOOL_COMPLETED, payload)]
