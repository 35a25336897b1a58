"""Tool approval: a person's answer gates a call's dispatch (docs/api.md "Tool approval").

Inside a transaction in which the caller (runtime) holds the call's run locked; the call and its approval are
locked through tools/locks.py, in the order of docs/locking.md. Like every write path of tools, each returns the
events it wants appended instead of writing the event log.
"""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core.error_codes import ErrorCode
from core.errors import Conflict, Gone, InvalidRequest, NotFound
from runtime.models import EventType, Run
from tools import locks
from tools.device_bridge import no_device_result, open_invocation
from tools.models import ApprovalOutcome, ApprovalStatus, ToolApproval, ToolCall, ToolCallState
from tools.permissions import grant
from tools.receipts import Events, error_result, save_receipt
from tools.registry import registry
from tools.selectors import device_for_submission


@dataclass(frozen=True)
class ApprovalAnswer:
    """The owner's answer as validated at the edge; `arguments` replaces the agent's (an edit) when given."""

    approve: bool
    client_decision_id: str
    arguments: dict | None = None
    reason: str = ""
    # "Always allow for this tool": with an approval, the owner's standing permission for the tool (tools.permissions).
    remember: bool = False

    def to_record(self) -> dict:
        record = {"approve": self.approve, "arguments": self.arguments, "reason": self.reason}
        return {**record, "remember": True} if self.remember else record


def ask_approval(call: ToolCall) -> dict:
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
    if answer.remember:
        grant(run.owner_id, definition)
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
            refusal = no_device_result(call.tool_name)
        else:
            decided["device"] = open_invocation(call, definition, device)
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
    call = locks.lock_tool_call(run.id, id=tool_call_id)
    approval = locks.lock_approval(call)
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


def deny_for_cancel(run: Run) -> Events:
    """Inside the cancel's transaction (the run locked first): every pending approval of the run is denied."""
    events = []
    for approval in locks.lock_pending_approvals(run.id):
        message = "The run was cancelled before this call was approved."
        events += _deny(approval.tool_call, approval, ApprovalOutcome.CANCELLED, message)
    return events


def deny_expired(run: Run) -> tuple[int, Events]:
    """The locked run's approvals past their deadline are denied (the agent reads `approval_timeout`); returns how
    many, with their events."""
    expired = list(locks.lock_pending_approvals(run.id, expires_at__lte=timezone.now()))
    events = []
    for approval in expired:
        seconds = (approval.expires_at - approval.created_at).total_seconds()
        message = f"No one approved this call within {seconds:.0f} seconds."
        events += _deny(approval.tool_call, approval, ApprovalOutcome.TIMED_OUT, message)
    return len(expired), events
