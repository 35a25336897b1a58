"""Every row lock tools takes: tool calls, their approvals and device invocations, and devices.

All but the device's are taken inside a transaction that already holds the call's Run (runtime/locks.py), so two
writers of one call meet at the run first; the order below is kept all the same. The global order, with every
app's rows, is in docs/locking.md: device, then run, then invocation, then tool call, then approval.

One mode throughout, FOR NO KEY UPDATE: no transaction changes a key of these rows, and the stronger mode would
make the inserts that reference them wait (a receipt on its call, an invocation on its device). On a device that
wait was a deadlock: a registration holding its device waits for a run, whose holder inserts an invocation
referencing that device.
"""

from django.db.models import QuerySet

from tools.models import ApprovalStatus, Device, DeviceInvocation, ToolApproval, ToolCall


def lock_tool_call(run_id, **lookup) -> ToolCall:
    """One call of the run (by its provider `call_id` or its `id`); raises ToolCall.DoesNotExist."""
    return ToolCall.objects.select_for_update(no_key=True).get(run_id=run_id, **lookup)


def lock_approval(call: ToolCall) -> ToolApproval | None:
    """The locked call's approval, None when none was asked for."""
    return ToolApproval.objects.select_for_update(no_key=True).filter(tool_call=call).first()


def lock_pending_approvals(run_id, **filters) -> QuerySet:
    """The run's pending approvals, oldest first, each locked with its call (one statement takes both)."""
    return (
        ToolApproval.objects.select_for_update(no_key=True, of=("self", "tool_call"))
        .select_related("tool_call")
        .filter(tool_call__run_id=run_id, status=ApprovalStatus.PENDING, **filters)
        .order_by("created_at")
    )


def locking_invocations() -> QuerySet:
    """Device invocations locked as they are read (the invocation alone), each read with its call."""
    return DeviceInvocation.objects.select_for_update(no_key=True, of=("self",)).select_related("tool_call")


def lock_device(*, owner, installation_id: str, tools: list[str]) -> tuple[Device, bool]:
    """The owner's device of that installation, locked, created with `tools` if new; returns it and whether it was
    created. Raises IntegrityError when a concurrent first registration of the same device won."""
    return Device.objects.select_for_update(no_key=True).get_or_create(
        owner=owner, installation_id=installation_id, defaults={"tools": tools}
    )
