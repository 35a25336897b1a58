"""Brings a recorded tool call to a durable receipt, as its side-effect class allows.

- read: run outside any transaction, under a timeout, repeated freely (also after a worker died);
- transactional: the effect and its receipt commit in one fenced transaction, so an attempt either
  left both or neither, and a retry after a rollback cannot act twice;
- uncertain (device tools): one invocation, ever, which only the device executes; the caller waits for
  its receipt (see `device_receipt`) and, past the deadline, the call is uncertain and the agent told so.
A receipt, once saved, is what every later delivery of the call gets.

`fence` opens the run's fenced transaction and yields a read-only view of the locked run (the caller owns
leases and the run's state); it raises when the lease was lost, so nothing here commits for a worker that was
replaced. The events a settled call returns are appended through the view, in that transaction.
"""

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Protocol

from django.db import OperationalError, connection
from psycopg import errors as pg_errors

from core import telemetry
from core.database import release_connection
from core.error_codes import ErrorCode
from tools import device_bridge, services
from tools.models import DeviceInvocation, SideEffect, ToolCall, ToolReceipt
from tools.receipts import Events, error_result
from tools.registry import ToolDefinition, ToolError, ToolInvocation, ToolUnavailable, registry


class FencedRun(Protocol):
    """What a fenced block holds: the run's fields to read, and `append` for the events of what it settled."""

    def append(self, events: Events) -> None: ...


Fence = Callable[[], AbstractContextManager[FencedRun]]


def _call_attributes(call: ToolCall, **_) -> dict:
    return {"impo.run.id": call.run_id, "impo.tool.call_id": call.call_id, "impo.tool.name": call.tool_name}


def _dispatch_outcome(receipt: ToolReceipt | None) -> dict:
    if receipt is None:
        return {"impo.tool.outcome": "awaiting_device"}
    error = receipt.result.get("error")
    return {"impo.tool.outcome": "error" if error else "ok", "impo.tool.error_code": error and error.get("code")}


@telemetry.traced("impo.tool.dispatch", attributes=_call_attributes, outcome=_dispatch_outcome)
def settle(call: ToolCall, *, fence: Fence, check: Callable[[], None]) -> ToolReceipt | None:
    """The call's receipt, acting if it has none yet; None for a device call still in its device's hands.

    `check` raises once the heartbeat found the lease taken over.
    """
    receipt = ToolReceipt.objects.filter(tool_call=call).first()
    if receipt is not None:
        return receipt
    # record_call settled every call it could not dispatch, so this one's tool is offered here.
    definition = registry.get(call.tool_name)
    if definition.device:
        return None
    if definition.side_effect == SideEffect.TRANSACTIONAL:
        return _attempts(call, definition, fence, check, _act_in_transaction)
    return _attempts(call, definition, fence, check, _read)


def device_receipt(call: ToolCall, *, fence: Fence, cancel_requested: bool) -> ToolReceipt | None:
    """One look at a device call: its receipt, or the one its deadline or a cancellation makes; else None."""
    receipt = ToolReceipt.objects.filter(tool_call=call).first()
    if receipt is not None:
        return receipt
    expires_at = DeviceInvocation.objects.values_list("expires_at", flat=True).get(tool_call=call)
    if cancel_requested:
        with fence() as run:
            receipt, events = device_bridge.withdraw_invocation(run, call.call_id)
            run.append(events)
    if receipt is None and time.time() >= expires_at.timestamp():
        with fence() as run:
            receipt, events = device_bridge.expire_invocation(run, call.call_id)
            run.append(events)
    return receipt


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


def _attempts(call, definition: ToolDefinition, fence: Fence, check, act) -> ToolReceipt:
    """Up to the policy's attempts for this delivery; transient failures and timeouts are retried."""
    last_failure = None
    for attempt in range(1, definition.retry.attempts + 1):
        if attempt > 1:
            release_connection()  # a retry's pause holds none of the worker's pooled connections
            time.sleep(definition.retry.delay_before(attempt))
        check()
        with fence() as run:
            services.mark_dispatched(run, call.call_id)
        try:
            return act(call, definition, fence)
        except ToolUnavailable as exc:
            last_failure = error_result(exc.code, exc.message)
        except _TimedOut:
            last_failure = error_result(
                ErrorCode.TIMEOUT, f"{definition.name} did not finish within {definition.timeout:g} seconds."
            )
        except ToolError as exc:
            return _save_result(fence, call, error_result(exc.code, exc.message))
    return _save_result(fence, call, last_failure)


def _save_result(fence: Fence, call: ToolCall, result: dict) -> ToolReceipt:
    with fence() as run:
        receipt, events = services.save_result(run, call.call_id, result)
        run.append(events)
        return receipt


def _bound_statements(definition: ToolDefinition, *, to_transaction: bool) -> None:
    """The tool's timeout as the statement timeout of this thread's connection (of its transaction alone, `SET
    LOCAL`, when `to_transaction`); through `set_config`, since SET takes no bound parameter."""
    with connection.cursor() as cursor:
        timeout = f"{int(definition.timeout * 1000)}ms"
        cursor.execute("SELECT set_config('statement_timeout', %s, %s)", [timeout, to_transaction])


def _read(call, definition: ToolDefinition, fence: Fence) -> ToolReceipt:
    invocation = _invocation(call)

    def run_handler():
        try:
            # An abandoned read must not hold this thread's connection past its timeout: its statements are
            # cancelled then, the handler ends and the connection is closed below.
            _bound_statements(definition, to_transaction=False)
            return definition.handler(invocation)
        finally:
            connection.close()  # this thread's own connection

    # A timed-out read is abandoned, not stopped; it has no effect to undo.
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"tool-{definition.name}")
    try:
        output = executor.submit(run_handler).result(timeout=definition.timeout)
    except TimeoutError:
        raise _TimedOut() from None
    except OperationalError as exc:
        if _statement_timed_out(exc):
            raise _TimedOut() from exc  # its statement timeout fired just before the wait gave up
        raise
    finally:
        executor.shutdown(wait=False)
    return _save_result(fence, call, {"output": output})


def _act_in_transaction(call, definition: ToolDefinition, fence: Fence) -> ToolReceipt:
    try:
        with fence() as run:
            # Bounds each statement of the effect; a cancelled one rolls the whole attempt back.
            _bound_statements(definition, to_transaction=True)
            output = definition.handler(_invocation(call))
            receipt, events = services.save_result(run, call.call_id, {"output": output})
            run.append(events)
            return receipt
    except OperationalError as exc:
        if _statement_timed_out(exc):
            raise _TimedOut() from exc
        raise


def _statement_timed_out(exc: OperationalError) -> bool:
    return isinstance(exc.__cause__, pg_errors.QueryCanceled)
