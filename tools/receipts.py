"""A tool call's result: the receipt that settles it, and the text the agent reads of it.

Every function joins the caller's transaction, in which the call's run and the call are locked (tools/locks.py,
in the order of docs/locking.md); none writes the event log: what a client should see is returned as events,
`(type, payload)` pairs, which the caller appends in the same transaction.
"""

import json

from django.utils import timezone

from runtime.models import EventType, Run
from tools.models import ToolCall, ToolCallState, ToolReceipt


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


def completed_payload(call: ToolCall, result: dict) -> dict:
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
    return receipt, [(EventType.TOOL_COMPLETED, completed_payload(call, result))]


def make_uncertain(call: ToolCall, code: str, message: str) -> tuple[ToolReceipt, Events]:
    """A call whose device may or may not have acted: never retried, listed for staff, the agent told so."""
    call.transition_to(ToolCallState.UNCERTAIN)
    call.error_code = code
    call.save(update_fields=["state", "error_code", "updated_at"])
    receipt = ToolReceipt.objects.create(tool_call=call, result=error_result(code, message))
    payload = {"toolCallId": call.call_id, "toolName": call.tool_name, "code": code, "message": message}
    return receipt, [(EventType.TOOL_UNCERTAIN, payload)]


def mark_submitted(run: Run, receipt_ids: list[int]) -> None:
    """The provider acknowledged these results (202): a successor need not send them again."""
    ToolReceipt.objects.filter(id__in=receipt_ids, tool_call__run_id=run.id, submitted_at__isnull=True).update(
        submitted_at=timezone.now()
    )
