"""The device bridge's changes to devices and their invocations (ICA v1, DESIGN §4), inside a transaction in which
the caller (runtime) holds the invocation's run locked; like `tools.services`, each returns the events it wants
appended instead of writing the event log.
"""

import uuid

from django.utils import timezone

from impo.error_codes import ErrorCode
from impo.errors import Conflict, Gone, NotFound
from runtime.models import EventType, Run
from tools.models import OPEN_INVOCATION_STATUSES, Device, DeviceInvocation, InvocationStatus, ToolCallState
from tools.services import Events, end_invocation, error_result, locked_call, save_receipt


def save_device(*, owner, installation_id: str, tools: list[str]) -> tuple[Device, bool]:
    """Same user and installation -> same device, locked; its tool list is replaced by the latest one.

    Returns the device and whether some tool was dropped (the caller then revokes its open invocations).
    Raises IntegrityError when a concurrent first registration of the same device won.
    """
    device, created = Device.objects.select_for_update().get_or_create(
        owner=owner, installation_id=installation_id, defaults={"tools": tools}
    )
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
        DeviceInvocation.objects.select_for_update(of=("self",))
        .select_related("tool_call")
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
    invocation = (
        DeviceInvocation.objects.select_for_update(of=("self",)).select_related("tool_call").get(id=invocation_id)
    )
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
    call = locked_call(run, invocation.tool_call.call_id)
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
    return False, save_receipt(locked_call(run, invocation.tool_call.call_id), _device_result(report))[1]


def _device_result(report: dict) -> dict:
    if report["success"]:
        return {"output": report.get("output")}
    error = report.get("error")
    if isinstance(error, dict):
        return error_result(str(error.get("code") or ErrorCode.DEVICE_ERROR), str(error.get("message") or ""))
    return error_result(ErrorCode.DEVICE_ERROR, str(error or "The device reported a failure."))
