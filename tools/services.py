"""Write paths of tool calls (recording, dispatch, staff's finding), inside a transaction in which the caller
(runtime) holds the call's run locked.

Locks are taken through tools/locks.py, in the order of docs/locking.md: a Run row, then its invocation, tool
call and approval rows, then (through the event log) its Conversation row. Every function here takes the run its
caller locked (a model, or the read-only view a fenced block holds) and joins the caller's transaction; none
changes the run itself (its states belong to runtime), and none writes the event log: what a client should see is
returned as events, `(type, payload)` pairs, which the caller appends in the same transaction.
"""

import json
import uuid

from django.utils import timezone

from core import telemetry
from core.error_codes import ErrorCode
from core.errors import Conflict
from runtime.models import EventType, Run
from tools import locks
from tools.approvals import ask_approval
from tools.device_bridge import no_device_result, open_invocation
from tools.models import ToolCall, ToolCallState, ToolReceipt
from tools.permissions import is_always_allowed
from tools.receipts import Events, completed_payload, error_result, save_receipt
from tools.registry import ToolDefinition
from tools.selectors import device_for_submission, offered_tool, staff_finding


def _requested_payload(call: ToolCall) -> dict:
    return {
        "toolCallId": call.call_id,
        "toolName": call.tool_name,
        "input": call.arguments if call.arguments is not None else call.raw_arguments,
        "sideEffect": call.side_effect,
    }


def _parse_arguments(raw) -> dict | None:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return None
    return parsed if isinstance(parsed, dict) else None


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
            refusal = no_device_result(name)
    requested = [(EventType.TOOL_REQUESTED, _requested_payload(call))]
    asked = refusal is None and definition.requires_approval(parsed)
    if asked and not is_always_allowed(run.owner_id, definition):
        # Asked before anything is dispatched, unless its owner always allows the tool; a device call's invocation
        # opens only once it is approved.
        requested.append((EventType.TOOL_APPROVAL_REQUESTED, ask_approval(call)))
    elif device is not None:
        requested[0][1]["device"] = open_invocation(call, definition, device)
    if refusal is not None:
        requested += save_receipt(call, refusal)[1]
    return call, requested


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
    call = locks.lock_tool_call(run.id, call_id=call_id)
    call.transition_to(ToolCallState.DISPATCHED)
    call.attempts += 1
    call.save(update_fields=["state", "attempts", "updated_at"])
    return call


def save_result(run: Run, call_id: str, result: dict) -> tuple[ToolReceipt, Events]:
    return save_receipt(locks.lock_tool_call(run.id, call_id=call_id), result)


# --- reconciliation ---------------------------------------------------------------------------------


def record_staff_finding(run: Run, tool_call_id: uuid.UUID, *, succeeded: bool, note: str) -> tuple[ToolCall, Events]:
    """Staff's finding about an uncertain call of the locked run: what really happened, shown to the owner as
    resolved by staff. The agent was already told the outcome was unknown and the run went on."""
    call = locks.lock_tool_call(run.id, id=tool_call_id)
    if call.state != ToolCallState.UNCERTAIN:
        raise Conflict(f"Tool call {call.call_id} is {call.state}, not uncertain.", code=ErrorCode.NOT_UNCERTAIN)
    call.transition_to(ToolCallState.SUCCEEDED if succeeded else ToolCallState.FAILED)
    call.resolution_note = note
    call.resolved_at = timezone.now()
    call.save(update_fields=["state", "resolution_note", "resolved_at", "updated_at"])
    payload = {**completed_payload(call, staff_finding(succeeded, note)), "resolvedByStaff": True}
    return call, [(EventType.TOOL_COMPLETED, payload)]
