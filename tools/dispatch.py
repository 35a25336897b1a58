"""Brings a recorded tool call to a durable receipt, as its side-effect class allows.

- read: run outside any transaction, under a timeout, repeated freely (also after a worker died);
- transactional: the effect and its receipt commit in one fenced transaction, so an attempt either
  left both or neither, and a retry after a rollback cannot act twice;
- uncertain (device tools): one invocation, ever; the worker waits for the device's receipt until
  the deadline, after which the call is uncertain and the run waits for reconciliation.
A receipt, once saved, is what every later delivery of the call gets.
"""

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import OperationalError, connection
from django.utils import timezone
from psycopg import errors as pg_errors

from runtime.services import Lease, fenced
from tools import services
from tools.models import DeviceInvocation, SideEffect, ToolCall, ToolCallState, ToolReceipt
from tools.registry import ToolDefinition, ToolError, ToolInvocation, ToolUnavailable, registry
from tools.selectors import cancel_requested

DEVICE_POLL_SECONDS = 0.25


def settle(lease: Lease, call_id: str, *, check: Callable[[], None]) -> ToolReceipt | None:
    """The call's receipt; None when its outcome is uncertain, after parking the run for reconciliation.

    `check` raises LeaseLost once the heartbeat found the lease taken over.
    """
    call = ToolCall.objects.select_related("run__submission__owner").get(call_id=call_id)
    receipt = ToolReceipt.objects.filter(tool_call=call).first()
    if receipt is not None:
        return receipt
    if call.state == ToolCallState.UNCERTAIN:
        services.park_for_uncertain_call(lease, call_id)
        return None
    # record_call settled every call it could not dispatch, so this one's tool is offered here.
    definition = registry.get(call.tool_name)
    if definition.device:
        return _await_device(lease, call, check)
    if definition.side_effect == SideEffect.TRANSACTIONAL:
        return _attempts(lease, call, definition, check, _act_in_transaction)
    return _attempts(lease, call, definition, check, _read)


def _invocation(call: ToolCall) -> ToolInvocation:
    return ToolInvocation(
        tool_call_id=call.id,
        call_id=call.call_id,
        owner=call.run.submission.owner,
        submission=call.run.submission,
        arguments=call.arguments,
    )


class _TimedOut(Exception):
    pass


def _attempts(lease, call, definition: ToolDefinition, check, act) -> ToolReceipt:
    """Up to the policy's attempts for this delivery; transient failures and timeouts are retried."""
    last_failure = None
    for attempt in range(1, definition.retry.attempts + 1):
        if attempt > 1:
            time.sleep(definition.retry.delay_before(attempt))
        check()
        services.mark_dispatched(lease, call.call_id)
        try:
            return act(lease, call, definition)
        except ToolUnavailable as exc:
            last_failure = services.error_result(exc.code, exc.message)
        except _TimedOut:
            last_failure = services.error_result(
                "timeout", f"{definition.name} did not finish within {definition.timeout:g} seconds."
            )
        except ToolError as exc:
            return services.save_result(lease, call.call_id, services.error_result(exc.code, exc.message))
    return services.save_result(lease, call.call_id, last_failure)


def _read(lease, call, definition: ToolDefinition) -> ToolReceipt:
    invocation = _invocation(call)

    def run_handler():
        try:
            return definition.handler(invocation)
        finally:
            connection.close()  # this thread's own connection

    # A timed-out read is abandoned, not stopped; it has no effect to undo.
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"tool-{definition.name}")
    try:
        output = executor.submit(run_handler).result(timeout=definition.timeout)
    except TimeoutError:
        raise _TimedOut() from None
    finally:
        executor.shutdown(wait=False)
    return services.save_result(lease, call.call_id, {"output": output})


def _act_in_transaction(lease, call, definition: ToolDefinition) -> ToolReceipt:
    try:
        with fenced(lease) as run:
            with connection.cursor() as cursor:
                # Bounds each statement of the effect; a cancelled one rolls the whole attempt back.
                cursor.execute("SET LOCAL statement_timeout = %s", [f"{int(definition.timeout * 1000)}ms"])
            output = definition.handler(_invocation(call))
            return services.save_result_in_transaction(run, call.call_id, {"output": output})
    except OperationalError as exc:
        if isinstance(exc.__cause__, pg_errors.QueryCanceled):
            raise _TimedOut() from exc
        raise


def _await_device(lease, call: ToolCall, check) -> ToolReceipt | None:
    """Waits, holding the lease, for the device's receipt, the deadline or a cancellation."""
    services.enter_waiting_device(lease)
    while True:
        check()
        receipt = ToolReceipt.objects.filter(tool_call=call).first()
        if receipt is None and cancel_requested(lease.run_id):
            receipt = services.withdraw_invocation(lease, call.call_id)
        if receipt is not None:
            services.leave_waiting_device(lease)
            return receipt
        expires_at = DeviceInvocation.objects.values_list("expires_at", flat=True).get(tool_call=call)
        if timezone.now() >= expires_at and services.expire_invocation(lease, call.call_id):
            return None
        time.sleep(DEVICE_POLL_SECONDS)
