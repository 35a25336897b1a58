"""The device bridge's writes (ICA v1, docs/design.md §4) and staff's findings on uncertain tool calls.

Each is one durable transaction that locks the call's run first (`runtime.locks`), then lets `tools.services`
change the call or invocation, and appends the events it returns: tools never write the event log themselves.
"""

import uuid

from django.db import IntegrityError, transaction

from core import telemetry
from core.error_codes import ErrorCode
from core.errors import Conflict, NotFound
from runtime import locks
from runtime.models import Run
from runtime.services.projection import project_events
from tools import device_bridge
from tools import services as tool_services
from tools.models import Device, DeviceInvocation, ToolCall
from tools.selectors import invocation_traceparent


def resolve_uncertain_call(tool_call_id: uuid.UUID, *, succeeded: bool, note: str) -> ToolCall:
    """Staff's finding about an uncertain call: what really happened, shown to the owner as resolved by staff."""
    with transaction.atomic(durable=True):
        run = locks.lock_run(tool_calls__id=tool_call_id)
        if run is None:
            raise ToolCall.DoesNotExist(f"tool call {tool_call_id}")
        call, events = tool_services.record_staff_finding(run, tool_call_id, succeeded=succeeded, note=note)
        project_events(run, events)
        return call


def register_device(*, owner, installation_id: str, tools: list[str]) -> Device:
    """Same user and installation -> same device; its tool list is replaced by the latest one.

    A tool no longer listed is revoked: its open invocations end (`permission_revoked`), so the runs
    waiting on them go on instead of waiting out the deadline. Runs are locked before their invocations.
    """
    for _ in range(2):
        try:
            with transaction.atomic(durable=True):
                device, dropped = device_bridge.save_device(owner=owner, installation_id=installation_id, tools=tools)
                if dropped:
                    runs = locks.lock_runs(tool_calls__invocation__in=device_bridge.dropped_invocations(device))
                    for run in runs:
                        project_events(run, device_bridge.revoke_dropped_tools(run, device))
                return device
        except IntegrityError:
            continue  # a concurrent first registration won; the next round finds its row
    raise Conflict("The device registration could not be saved; try again.", code=ErrorCode.REGISTRATION_CONFLICT)


def _locked_invocation(owner, invocation_id: uuid.UUID, device_id: uuid.UUID) -> tuple[Run, DeviceInvocation]:
    """Another user's invocation and another device's look alike: not found (existence is not revealed)."""
    run = locks.lock_run_for_owner(owner, tool_calls__invocation__id=invocation_id)
    if run is None:
        raise NotFound("No such invocation.")
    return run, device_bridge.locked_invocation(run, invocation_id, device_id)


def _invocation_attributes(**arguments) -> dict:
    return {"impo.device_invocation.id": arguments["invocation_id"], "impo.device.id": arguments["device_id"]}


def _invocation_trace(**arguments) -> str:
    return invocation_traceparent(arguments["invocation_id"])


@telemetry.traced("impo.device_invocation.claim", attributes=_invocation_attributes, parent=_invocation_trace)
def claim_invocation(*, owner, invocation_id: uuid.UUID, device_id: uuid.UUID) -> DeviceInvocation:
    with transaction.atomic(durable=True):
        run, invocation = _locked_invocation(owner, invocation_id, device_id)
        project_events(run, device_bridge.claim_locked_invocation(run, invocation))
        return invocation


@telemetry.traced("impo.device_invocation.result", attributes=_invocation_attributes, parent=_invocation_trace)
def complete_invocation(
    *, owner, invocation_id: uuid.UUID, device_id: uuid.UUID, execution_id: uuid.UUID, report: dict
) -> bool:
    """Saves the device's result as the call's receipt; returns whether it was an identical retry."""
    with transaction.atomic(durable=True):
        run, invocation = _locked_invocation(owner, invocation_id, device_id)
        duplicate, events = device_bridge.complete_locked_invocation(
            run, invocation, execution_id=execution_id, report=report
        )
        project_events(run, events)
        return duplicate
