"""Write paths of tool calls: the worker's fenced writes, and the device bridge's durable ones.

Lock order, everywhere: a Run row, then its ToolCall / DeviceInvocation rows, then (through
runtime's append_events) its Conversation row. Worker writes go through runtime.services.fenced, so
a worker that lost its lease commits nothing.
"""

import json
import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from impo.errors import Conflict, Forbidden, Gone, NotFound
from runtime import outbound
from runtime.models import EventType, Run, RunState
from runtime.services import Lease, append_events, fenced
from tools.models import (
    Device,
    DeviceInvocation,
    InvocationStatus,
    ToolCall,
    ToolCallState,
    ToolReceipt,
)
from tools.registry import ToolDefinition
from tools.selectors import device_for_submission, offered_tool


def output_text(result: dict) -> str:
    """The receipt as the provider gets it: canonical, so a resubmission is byte-for-byte the same."""
    return json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def error_result(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def _events(run: Run, items: list[tuple[str, dict]]) -> None:
    append_events(run.submission.conversation_id, run.submission_id, items)


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


def _save_receipt(run: Run, call: ToolCall, result: dict) -> ToolReceipt:
    """Settles a locked call with its durable result and projects it; the caller's transaction commits both."""
    receipt = ToolReceipt.objects.create(tool_call=call, result=result)
    call.transition_to(ToolCallState.FAILED if "error" in result else ToolCallState.SUCCEEDED)
    call.error_code = result["error"]["code"] if "error" in result else ""
    call.save()
    _events(run, [(EventType.TOOL_COMPLETED, _completed_payload(call, result))])
    return receipt


def _parse_arguments(raw: str) -> dict | None:
    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


# --- worker side: record, dispatch, settle ----------------------------------------------------------


def record_call(lease: Lease, *, call_id: str, name: str, raw_arguments: str) -> ToolCall:
    """Records a provider's function call once; a redelivery (provider re-send, successor) finds it.

    A call that cannot be dispatched (not offered here, arguments not matching the schema, no device
    to run on) is settled on the spot with an error receipt the agent will read. A device tool's
    invocation is created in the same transaction, so it exists exactly once per call.
    """
    with fenced(lease) as run:
        existing = ToolCall.objects.filter(call_id=call_id).first()
        if existing is not None:
            return existing
        definition = offered_tool(run, name)
        arguments = _parse_arguments(raw_arguments)
        call = ToolCall.objects.create(
            run=run,
            call_id=call_id,
            tool_name=name,
            side_effect=definition.side_effect if definition else "",
            arguments=arguments,
            raw_arguments=raw_arguments,
        )
        refusal = _refusal(definition, name, arguments)
        device = None
        if refusal is None and definition.device:
            device = device_for_submission(run.submission, tool_name=name)
            if device is None:
                refusal = error_result("no_device", f"No registered device of this user can run {name}.")
        requested = _requested_payload(call)
        if device is not None:
            invocation = DeviceInvocation.objects.create(
                tool_call=call, device=device, expires_at=timezone.now() + timedelta(seconds=definition.timeout)
            )
            call.transition_to(ToolCallState.DISPATCHED)
            call.attempts = 1
            call.save()
            requested["device"] = {
                "invocationId": str(invocation.id),
                "deviceId": str(device.id),
                "expiresAt": invocation.expires_at.isoformat(),
            }
        _events(run, [(EventType.TOOL_REQUESTED, requested)])
        if refusal is not None:
            _save_receipt(run, call, refusal)
        return call


def _refusal(definition: ToolDefinition | None, name: str, arguments: dict | None) -> dict | None:
    if definition is None:
        return error_result("unknown_tool", f"No tool named {name!r} is available here.")
    if arguments is None:
        return error_result("invalid_arguments", "The arguments must be a JSON object.")
    problem = definition.validation_error(arguments)
    if problem is not None:
        return error_result("invalid_arguments", problem)
    return None


def mark_dispatched(lease: Lease, call_id: str) -> ToolCall:
    """Counts an attempt before acting, so a successor knows the call may already have acted."""
    with fenced(lease):
        call = ToolCall.objects.select_for_update().get(call_id=call_id)
        call.transition_to(ToolCallState.DISPATCHED)
        call.attempts += 1
        call.save()
        return call


def save_result(lease: Lease, call_id: str, result: dict) -> ToolReceipt:
    with fenced(lease) as run:
        call = ToolCall.objects.select_for_update().get(call_id=call_id)
        return _save_receipt(run, call, result)


def save_result_in_transaction(run: Run, call_id: str, result: dict) -> ToolReceipt:
    """For a transactional tool: inside the fenced transaction that performed the tool's effect."""
    call = ToolCall.objects.select_for_update().get(call_id=call_id)
    return _save_receipt(run, call, result)


def park_for_uncertain_call(lease: Lease, call_id: str) -> None:
    """For a run resumed while one of its calls is still uncertain: it goes back to waiting."""
    with fenced(lease) as run:
        _park(run, ToolCall.objects.get(call_id=call_id))


def _park(run: Run, call: ToolCall) -> None:
    """Parks the locked run until reconciliation settles `call` (the fields of runtime's await_reconciliation).

    Done in the transaction that made the call uncertain, so a finding recorded right after it always
    finds the run parked and resumes it.
    """
    reason = f"the outcome of tool call {call.call_id} ({call.tool_name}) is uncertain"
    run.transition_to(RunState.PENDING_RECONCILIATION)
    run.pending_intent_id = None
    run.lease_owner = ""
    run.lease_expires_at = None
    run.error_code = "pending_reconciliation"
    run.error_message = reason
    run.error_retryable = True
    _events(run, [(EventType.RUN_PENDING_RECONCILIATION, {"submissionId": str(run.submission_id), "reason": reason})])


def _make_uncertain(run: Run, call: ToolCall, *, code: str, message: str) -> None:
    call.transition_to(ToolCallState.UNCERTAIN)
    call.error_code = code
    call.save()
    _events(
        run,
        [
            (
                EventType.TOOL_UNCERTAIN,
                {"toolCallId": call.call_id, "toolName": call.tool_name, "code": code, "message": message},
            )
        ],
    )


def mark_submitted(lease: Lease, receipt: ToolReceipt) -> None:
    with fenced(lease):
        ToolReceipt.objects.filter(id=receipt.id, submitted_at__isnull=True).update(submitted_at=timezone.now())


def enter_waiting_device(lease: Lease) -> None:
    with fenced(lease) as run:
        if run.state == RunState.RUNNING:
            run.transition_to(RunState.WAITING_DEVICE)


def leave_waiting_device(lease: Lease) -> None:
    with fenced(lease) as run:
        if run.state == RunState.WAITING_DEVICE:
            run.transition_to(RunState.RUNNING)


def expire_invocation(lease: Lease, call_id: str) -> bool:
    """Past the deadline without a result: the call is uncertain and the run parked. False if a result won."""
    with fenced(lease) as run:
        invocation = (
            DeviceInvocation.objects.select_for_update(of=("self",))
            .select_related("tool_call")
            .get(tool_call__call_id=call_id)
        )
        if invocation.status == InvocationStatus.COMPLETED or timezone.now() < invocation.expires_at:
            return False
        invocation.status = InvocationStatus.EXPIRED
        invocation.save()
        call = ToolCall.objects.select_for_update().get(id=invocation.tool_call_id)
        _make_uncertain(
            run,
            call,
            code="device_timeout",
            message="The device did not report a result before the deadline; the action may or may not have run.",
        )
        _park(run, call)
        return True


def withdraw_invocation(lease: Lease, call_id: str) -> ToolReceipt | None:
    """On cancellation: an unclaimed invocation is withdrawn (it never ran); a claimed one is left to finish."""
    with fenced(lease) as run:
        invocation = (
            DeviceInvocation.objects.select_for_update(of=("self",))
            .select_related("tool_call")
            .get(tool_call__call_id=call_id)
        )
        if invocation.status != InvocationStatus.PENDING:
            return None
        invocation.status = InvocationStatus.CANCELLED
        invocation.save()
        call = ToolCall.objects.select_for_update().get(id=invocation.tool_call_id)
        return _save_receipt(
            run, call, error_result("cancelled", "The run was cancelled before the device claimed it.")
        )


def reopen_abandoned_device_wait(run_id) -> None:
    """Lets runtime's claim take over a run whose worker died while waiting for a device.

    claim_run takes queued runs and running ones with an expired lease; a waiting_device run with
    an expired lease is put back to running (its lease stays expired) so the next claim resumes it.
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(skip_locked=True)
            .filter(id=run_id, state=RunState.WAITING_DEVICE, lease_expires_at__lt=timezone.now())
            .first()
        )
        if run is not None:
            run.transition_to(RunState.RUNNING)
            run.save()


# --- reconciliation ---------------------------------------------------------------------------------


def resolve_uncertain_call(call_id, *, succeeded: bool, note: str) -> ToolReceipt:
    """An operator's finding about an uncertain call; the run resumes once nothing else is uncertain.

    The finding becomes the call's receipt, which the resumed run submits to the provider.
    """
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update(of=("self",)).select_related("submission").get(tool_calls__call_id=call_id)
        call = ToolCall.objects.select_for_update().get(call_id=call_id)
        if call.state != ToolCallState.UNCERTAIN:
            raise Conflict(f"Tool call {call_id} is {call.state}, not uncertain.", code="not_uncertain")
        result = (
            {"output": {"reconciled": True, "note": note}} if succeeded else error_result("reconciled_failed", note)
        )
        receipt = _save_receipt(run, call, result)
        still_uncertain = run.tool_calls.filter(state=ToolCallState.UNCERTAIN).exists()
        if run.state == RunState.PENDING_RECONCILIATION and run.pending_intent_id is None and not still_uncertain:
            run.transition_to(RunState.QUEUED)
            run.error_code, run.error_message, run.error_retryable = "", "", False
            run.last_woken_at = timezone.now()
            run.save()
            outbound.wake_run(run.id)
        return receipt


# --- device bridge (ICA v1, DESIGN §4) --------------------------------------------------------------


def register_device(*, owner, installation_id: str, tools: list[str]) -> Device:
    """Same user and installation -> same device; its tool list is replaced by the latest one."""
    for _ in range(2):
        try:
            with transaction.atomic(durable=True):
                device, created = Device.objects.select_for_update().get_or_create(
                    owner=owner, installation_id=installation_id, defaults={"tools": tools}
                )
                if not created and device.tools != tools:
                    device.tools = tools
                    device.save()
                return device
        except IntegrityError:
            continue  # a concurrent first registration won; the next round finds its row
    raise Conflict("The device registration could not be saved; try again.", code="registration_conflict")


def _locked_invocation(owner, invocation_id: uuid.UUID) -> tuple[Run, DeviceInvocation]:
    run = (
        Run.objects.select_for_update(of=("self",))
        .select_related("submission")
        .filter(tool_calls__invocation__id=invocation_id, submission__owner=owner)
        .first()
    )
    if run is None:
        raise NotFound("No such invocation.")
    invocation = (
        DeviceInvocation.objects.select_for_update(of=("self",)).select_related("tool_call").get(id=invocation_id)
    )
    return run, invocation


def claim_invocation(*, owner, invocation_id: uuid.UUID, device_id: uuid.UUID) -> DeviceInvocation:
    with transaction.atomic(durable=True):
        run, invocation = _locked_invocation(owner, invocation_id)
        if invocation.device_id != device_id:
            raise Forbidden("This invocation belongs to another device.", code="wrong_device")
        if invocation.status in (InvocationStatus.CLAIMED, InvocationStatus.COMPLETED):
            return invocation  # the same device claiming again gets the same execution
        if invocation.status != InvocationStatus.PENDING or timezone.now() >= invocation.expires_at:
            raise Gone("This invocation expired or was cancelled.", code="invocation_expired")
        invocation.status = InvocationStatus.CLAIMED
        invocation.execution_id = uuid.uuid4()
        invocation.claimed_at = timezone.now()
        invocation.save()
        call = ToolCall.objects.select_for_update().get(id=invocation.tool_call_id)
        call.transition_to(ToolCallState.ACCEPTED)
        call.save()
        _events(
            run,
            [
                (
                    EventType.TOOL_ACCEPTED,
                    {
                        "toolCallId": call.call_id,
                        "toolName": call.tool_name,
                        "invocationId": str(invocation.id),
                        "deviceId": str(invocation.device_id),
                        "status": run.state,
                    },
                )
            ],
        )
        return invocation


def complete_invocation(
    *, owner, invocation_id: uuid.UUID, device_id: uuid.UUID, execution_id: uuid.UUID, report: dict
) -> bool:
    """Saves the device's result as the call's receipt; returns whether it was an identical retry."""
    with transaction.atomic(durable=True):
        run, invocation = _locked_invocation(owner, invocation_id)
        if invocation.device_id != device_id:
            raise Forbidden("This invocation belongs to another device.", code="wrong_device")
        if invocation.status in (InvocationStatus.EXPIRED, InvocationStatus.CANCELLED):
            raise Gone("This invocation expired or was cancelled.", code="invocation_expired")
        if invocation.status == InvocationStatus.PENDING:
            if timezone.now() >= invocation.expires_at:
                raise Gone("This invocation expired.", code="invocation_expired")
            raise Conflict("Claim the invocation before reporting its result.", code="not_claimed")
        if invocation.execution_id != execution_id:
            raise Conflict("This result is for another execution of the invocation.", code="execution_mismatch")
        if invocation.status == InvocationStatus.COMPLETED:
            if invocation.result != report:
                raise Conflict("A different result was already recorded.", code="result_conflict")
            return True
        if timezone.now() >= invocation.expires_at:
            raise Gone("The result arrived after the invocation's deadline.", code="invocation_expired")
        invocation.status = InvocationStatus.COMPLETED
        invocation.result = report
        invocation.completed_at = timezone.now()
        invocation.save()
        call = ToolCall.objects.select_for_update().get(id=invocation.tool_call_id)
        _save_receipt(run, call, _device_result(report))
        return False


def _device_result(report: dict) -> dict:
    if report["success"]:
        return {"output": report.get("output")}
    error = report.get("error")
    if isinstance(error, dict):
        return error_result(str(error.get("code") or "device_error"), str(error.get("message") or ""))
    return error_result("device_error", str(error or "The device reported a failure."))
