"""The device bridge's changes to devices and their invocations (ICA v1, docs/design.md §4), inside a transaction in
which the caller (runtime) holds the invocation's run locked; like every write path of tools, each returns the events
it wants appended instead of writing the event log.
"""

import uuid
from datetime import timedelta

from django.utils import timezone

from core import telemetry
from core.error_codes import ErrorCode
from core.errors import Conflict, Gone, NotFound
from runtime.models import EventType, Run
from tools import locks
from tools.models import (
    OPEN_INVOCATION_STATUSES,
    Device,
    DeviceInvocation,
    InvocationStatus,
    ToolCall,
    ToolCallState,
    ToolReceipt,
)
from tools.receipts import Events, error_result, make_uncertain, save_receipt
from tools.registry import ToolDefinition


def save_device(*, owner, installation_id: str, tools: list[str]) -> tuple[Device, bool]:
    """Same user and installation -> same device, locked; its tool list is replaced by the latest one.

    Returns the device and whether some tool was dropped (the caller then revokes its open invocations).
    Raises IntegrityError when a concurrent first registration of the same device won.
    """
    device, created = locks.lock_device(owner=owner, installation_id=installation_id, tools=tools)
    if created or device.tools == tools:
        return device, False
    device.tools = tools
    device.save(update_fields=["tools", "updated_at"])
    return device, True


def dropped_invocations(device: Device):
    """The device's open invocations of tools it no longer offers (a subquery)."""
    return DeviceInvocation.objects.filter(device=device, status__in=OPEN_INVOCATION_STATUSES).exclude(
        tool_call__tool_name__in=device.tools
    )


def revoke_dropped_tools(run: Run, device: Device) -> Events:
    """Ends the locked run's open invocations of tools the device no longer offers (`permission_revoked`), so the
    run goes on instead of waiting out the deadline."""
    invocations = (
        locks.locking_invocations()
        .filter(tool_call__run_id=run.id, device=device, status__in=OPEN_INVOCATION_STATUSES)
        .exclude(tool_call__tool_name__in=device.tools)
        .order_by("created_at")
    )
    events = []
    for invocation in invocations:
        message = f"The device no longer offers {invocation.tool_call.tool_name}."
        events += end_invocation(run, invocation, InvocationStatus.REVOKED, ErrorCode.PERMISSION_REVOKED, message)[1]
    return events


def locked_invocation(run: Run, invocation_id: uuid.UUID, device_id: uuid.UUID) -> DeviceInvocation:
    """The invocation of the locked run; another device's looks like a missing one (existence is not revealed)."""
    invocation = locks.locking_invocations().get(id=invocation_id)
    if invocation.device_id != device_id:
        raise NotFound("No such invocation.")
    return invocation


# Why an invocation no longer accepts a claim or a first result, in the codes the original's apps know.
_GONE = {
    InvocationStatus.EXPIRED: (ErrorCode.INVOCATION_EXPIRED, "This invocation expired."),
    InvocationStatus.CANCELLED: (ErrorCode.INVOCATION_CANCELLED, "The run of this invocation was cancelled."),
    InvocationStatus.REVOKED: (ErrorCode.PERMISSION_REVOKED, "The device no longer offers this tool."),
}


def _refuse_if_gone(run: Run, invocation: DeviceInvocation) -> None:
    """410 once the invocation ended, or its run's cancel was asked for (the worker ends it soon after)."""
    if invocation.status in _GONE:
        code, message = _GONE[invocation.status]
        raise Gone(message, code=code)
    if run.cancel_requested_at is not None:
        raise Gone(_GONE[InvocationStatus.CANCELLED][1], code=ErrorCode.INVOCATION_CANCELLED)
    if timezone.now() >= invocation.expires_at:
        raise Gone(_GONE[InvocationStatus.EXPIRED][1], code=ErrorCode.INVOCATION_EXPIRED)


def claim_locked_invocation(run: Run, invocation: DeviceInvocation) -> Events:
    """The device's claim of an invocation of the locked run; the same device claiming again gets the same one."""
    if invocation.status == InvocationStatus.COMPLETED:
        return []
    _refuse_if_gone(run, invocation)
    if invocation.status == InvocationStatus.CLAIMED:
        return []
    invocation.status = InvocationStatus.CLAIMED
    invocation.execution_id = uuid.uuid4()
    invocation.claimed_at = timezone.now()
    invocation.save(update_fields=["status", "execution_id", "claimed_at"])
    call = locks.lock_tool_call(run.id, id=invocation.tool_call_id)
    call.transition_to(ToolCallState.ACCEPTED)
    call.save(update_fields=["state", "updated_at"])
    accepted = {
        "toolCallId": call.call_id,
        "toolName": call.tool_name,
        "invocationId": str(invocation.id),
        "deviceId": str(invocation.device_id),
        "status": run.state,
    }
    return [(EventType.TOOL_ACCEPTED, accepted)]


def complete_locked_invocation(
    run: Run, invocation: DeviceInvocation, *, execution_id: uuid.UUID, report: dict
) -> tuple[bool, Events]:
    """Saves the device's result as the call's receipt; returns whether it was an identical retry, and the events.

    An identical retry is answered as a duplicate whatever happened since (a deadline, a cancel): the
    device saved its result before posting it and may post it again until it hears back.
    """
    if invocation.execution_id is not None and invocation.execution_id != execution_id:
        raise Conflict("This result is for another execution of the invocation.", code=ErrorCode.EXECUTION_MISMATCH)
    if invocation.status == InvocationStatus.COMPLETED:
        if invocation.result != report:
            raise Conflict("A different result was already recorded.", code=ErrorCode.IDEMPOTENCY_CONFLICT)
        return True, []
    _refuse_if_gone(run, invocation)
    if invocation.status == InvocationStatus.PENDING:
        raise Conflict("Claim the invocation before reporting its result.", code=ErrorCode.INVOCATION_NOT_CLAIMED)
    invocation.status = InvocationStatus.COMPLETED
    invocation.result = report
    invocation.completed_at = timezone.now()
    invocation.save(update_fields=["status", "result", "completed_at"])
    return False, save_receipt(locks.lock_tool_call(run.id, id=invocation.tool_call_id), _device_result(report))[1]


def _device_result(report: dict) -> dict:
    if report["success"]:
        return {"output": report.get("output")}
    error = report.get("error")
    if isinstance(error, dict):
        return error_result(str(error.get("code") or ErrorCode.DEVICE_ERROR), str(error.get("message") or ""))
    return error_result(ErrorCode.DEVICE_ERROR, str(error or "The device reported a failure."))


# --- the worker's side: a call's one invocation, opened and ended ---------------------------------------


def no_device_result(name: str) -> dict:
    return error_result(ErrorCode.NO_DEVICE, f"No registered device of this user can run {name}.")


def open_invocation(call: ToolCall, definition: ToolDefinition, device: Device) -> dict:
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


def _locked_invocation_of_call(run: Run, call_id: str) -> DeviceInvocation:
    return locks.locking_invocations().get(tool_call__run_id=run.id, tool_call__call_id=call_id)


def end_invocation(
    run: Run, invocation: DeviceInvocation, status: str, code: str, message: str
) -> tuple[ToolReceipt, Events]:
    """Ends an open invocation: one never claimed did not run (an error receipt); a claimed one may have."""
    was_claimed = invocation.status == InvocationStatus.CLAIMED
    invocation.status = status
    invocation.save(update_fields=["status"])
    call = locks.lock_tool_call(run.id, id=invocation.tool_call_id)
    if was_claimed:
        return make_uncertain(call, code, message)
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
    return make_uncertain(locks.lock_tool_call(run.id, call_id=call_id), ErrorCode.DEVICE_TIMEOUT, message)


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
