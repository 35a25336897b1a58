"""A turn's function calls: each result is settled and persisted before it is sent back as a `tool_result`
event keyed by the call; a call that needs its owner's approval parks the run, holding no worker, until the answer
(or its deadline, or a cancel) requeues it (docs/design.md §4).
"""

import logging

from rebyte.models import RemoteSession
from runtime import selectors
from runtime.execution.drive_state import DriveState
from runtime.execution.live_stream import pause
from runtime.services import lifecycle
from tools import dispatch, receipts
from tools import services as tool_services
from tools.models import ToolCall, ToolCallState, ToolReceipt

logger = logging.getLogger(__name__)

DEVICE_POLL_SECONDS = 0.25


class FunctionCalls:
    """The driver's phase that answers the turn's function calls, taking the drive's state."""

    def __init__(self, state: DriveState):
        self.state = state

    def answer(self, session: RemoteSession, turn_id: str, actions: list) -> bool:
        """Settles and sends each call's result; True when a call awaits approval and the run was parked."""
        state = self.state
        for action in actions:
            with state.fence() as run:
                call, events = tool_services.record_call(
                    run, call_id=action.call_id, name=action.name, arguments=action.arguments
                )
                run.append(events)
                if call.state == ToolCallState.AWAITING_APPROVAL:
                    lifecycle.await_approval(run)
            if call.state == ToolCallState.AWAITING_APPROVAL:
                logger.info("run %s: call %s awaits approval; the run is parked", state.run.id, call.call_id)
                return True
            call = ToolCall.objects.select_related("run__submission__owner").get(id=call.id)
            receipt = dispatch.settle(call, fence=state.fence, check=state.heartbeat.check)
            if receipt is None:
                receipt = self._await_device(call)
            if receipt.submitted_at is not None:
                continue  # acknowledged already; the provider has not caught up with it yet
            if selectors.cancel_requested(state.run.id):
                continue  # the agent gets no more input; the relayed cancel ends the turn
            result = receipt.result
            state.gateway.send_tool_result(
                session.remote_id,
                turn_id=turn_id,
                call_id=action.call_id,
                success="error" not in result,
                text=receipts.tool_result_text(result),
                idempotency_key=f"impo-tool-result-{call.id}",
            )
            with state.fence() as run:
                receipts.mark_submitted(run, [receipt.id])
        return False

    def _await_device(self, call: ToolCall) -> ToolReceipt:
        """Waits, holding the lease, until the device answers, the deadline passes or the run is cancelled."""
        state = self.state
        with state.fence() as run:
            lifecycle.enter_waiting_device(run)
        while True:
            state.heartbeat.check()
            receipt = dispatch.device_receipt(
                call, fence=state.fence, cancel_requested=selectors.cancel_requested(state.run.id)
            )
            if receipt is not None:
                with state.fence() as run:
                    lifecycle.leave_waiting_device(run)
                return receipt
            pause(DEVICE_POLL_SECONDS)
