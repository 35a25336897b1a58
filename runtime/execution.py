"""Drives one run against the provider, from claim to a terminal state, under a fenced lease.

The one module that knows runtime, tools and rebyte together (DESIGN §1.4, §5; shared/REBYTE.md):
- the run's input reaches its conversation's session once: as the first input of a new session (through a
  creation intent) or as one `input.message` event keyed `impo-run-<run id>`, sent only while no turn of
  the session is active, after the session's turns were recorded as the baseline its turn is new against;
- the session's live stream wakes the worker and carries text deltas; the turn, the session's items (by
  item id) and `required_actions` are the truth read on start, on resume and whenever the stream is quiet;
- what one read brings is applied in one fenced transaction, with the count of characters projected per
  item, so a successor after a crash projects only the rest;
- tool results are saved before they are sent back, as `tool_result` events keyed by the call;
- a call that needs its owner's approval parks the run, holding no worker, until the answer (or its
  deadline, or a cancel) requeues it; the successor then dispatches the call or sends its denial;
- a provider that is unavailable gives the run back with capped backoff (never failing it); a create
  whose outcome is unknown parks the run until reconciliation decides.
"""

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from impo import telemetry
from impo.error_codes import ErrorCode, RunError
from rebyte import bindings
from rebyte import services as rebyte_services
from rebyte.client import RebyteGateway, Refused, Unavailable, UnknownOutcome
from rebyte.models import CreationIntent, IntentKind, RemoteSession, RemoteTurn
from rebyte.provider import provider_gateway
from runtime import healing, run_input, selectors, services
from runtime.coalescing import Coalescer
from runtime.group_commit import group_commit
from runtime.heartbeat import HeldLease, process_heartbeat
from runtime.models import Run, RunState
from runtime.worker_threads import LiveStream, pause
from tools import dispatch
from tools import services as tool_services
from tools.models import ToolCall, ToolCallState, ToolReceipt
from tools.selectors import catalog_for_run

logger = logging.getLogger(__name__)

TERMINAL_TURN_STATES = {"completed": RunState.COMPLETED, "failed": RunState.FAILED, "cancelled": RunState.CANCELLED}
# Live events after which the truth is read at once rather than at the next quiet moment. (A new turn is bound
# from its own `turn.created` event; an item's end is one only if it is not the user's input, see _asks_for_truth.)
_TRUTH_EVENTS = frozenset(
    {
        "agent.session.turn.item.done",
        "agent.session.turn.completed",
        "agent.session.turn.failed",
        "agent.session.turn.cancelled",
        "agent.session.requires_action",
        "agent.session.idle",
        "agent.session.failed",
        "error",
    }
)
_STREAMING_TURN_STATES = frozenset({"queued", "in_progress"})
_TURN_END_EVENTS = frozenset(
    {"agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled"}
)
DEVICE_POLL_SECONDS = 0.25


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def execute_run(run_id, worker_id: str) -> None:
    claimed = _claim(run_id, worker_id)
    telemetry.annotate({"impo.run.claimed": claimed is not None, "impo.worker": worker_id})
    if claimed is None:
        return
    lease = claimed.lease
    with process_heartbeat.held(lease) as heartbeat:
        driver = _RunDriver(claimed, provider_gateway(), heartbeat)
        try:
            with telemetry.span("impo.run.drive", {"impo.run.id": run_id, "impo.run.attempt": lease.attempt}):
                driver.drive()
        except services.LeaseLost as exc:
            logger.warning("stopping: %s", exc)
        except rebyte_services.CreationRefused as exc:
            _finish_quietly(lease, RunState.FAILED, RunError(ErrorCode.PROVIDER_REJECTED, str(exc)))
        except rebyte_services.AgentGone:
            healing.start_over(lease, lost=None, reason=ErrorCode.AGENT_NOT_FOUND)
        except Refused as exc:
            if not healing.started_over_if_lost(lease, driver.session, exc, driver.gateway):
                _finish_quietly(lease, RunState.FAILED, RunError(ErrorCode.PROVIDER_ERROR, str(exc)))
        except (Unavailable, UnknownOutcome) as exc:
            _release_quietly(lease, f"provider unavailable: {exc}", provider=True)
        except Exception as exc:
            logger.exception("run %s: unexpected error; released for another attempt", run_id)
            _release_quietly(lease, f"{type(exc).__name__}: {exc}", provider=False)


@dataclass(frozen=True)
class _Claimed:
    lease: services.Lease
    run: Run
    remote_turn: RemoteTurn
    # For a run whose input has not left yet: the tools it is offered (and which of them run on its device), and
    # its conversation's session if the input may go there (None: a new session is created with the input).
    tools: list[dict] | None
    device_tools: list[str] | None
    session: RemoteSession | None


def _claim(run_id, worker_id: str) -> _Claimed | None:
    """The claim and everything the driver reads before its first provider call, in one transaction."""
    with transaction.atomic(durable=True):
        lease = services.claim(run_id, worker_id)
        if lease is None:
            return None
        run = selectors.run_to_execute(run_id)
        remote_turn = bindings.remote_turn_of(run)
        if remote_turn.session_id is not None or run.input_sent_at is not None:
            return _Claimed(lease, run, remote_turn, tools=None, device_tools=None, session=None)
        catalog = catalog_for_run(run)
        tools, device_tools = [tool.to_provider() for tool in catalog], [tool.name for tool in catalog if tool.device]
        session = rebyte_services.usable_session(
            run.submission.conversation, fingerprint=rebyte_services.tools_fingerprint(tools), now=timezone.now()
        )
        return _Claimed(lease, run, remote_turn, tools=tools, device_tools=device_tools, session=session)


def _finish_quietly(lease, state, error: RunError) -> None:
    try:
        services.finish_run(lease, state, error=error)
    except services.LeaseLost as exc:
        logger.warning("could not finish: %s", exc)


def _release_quietly(lease, cause: str, *, provider: bool) -> None:
    try:
        if provider:
            delay = services.release_for_provider(lease, cause=cause)
            logger.warning("run %s: %s; retrying in %.1f s", lease.run_id, cause, delay)
        else:
            services.release_after_error(lease, cause=cause)
    except services.LeaseLost as exc:
        logger.warning("could not release: %s", exc)


def _asks_for_truth(event) -> bool:
    if event.type == "agent.session.turn.item.done" and event.item.type == "message":
        # The user's input recorded as an item of the turn: nothing to project yet.
        return event.item.role != "user"
    return event.type in _TRUTH_EVENTS


class _RunDriver:
    def __init__(self, claimed: _Claimed, gateway: RebyteGateway, heartbeat: HeldLease):
        self.claimed = claimed
        self.run = claimed.run
        self.remote_turn = claimed.remote_turn
        self.lease = claimed.lease
        self.gateway = gateway
        self.heartbeat = heartbeat
        self.live_text: dict[str, str] = {}
        self.unprojected = Coalescer()  # the reply read since its last projection
        # The driver's own knowledge of the run, kept from what the lifecycle functions return (never by writing
        # its copy of the run, which is the claim's read).
        self.input_sent = claimed.run.input_sent_at is not None
        self.provider_failures = claimed.run.provider_failures
        # Seen on the run row each projection locks: a cancel asked for while deltas stream is relayed at once,
        # not at the next quiet moment.
        self.cancel_seen = False
        # The session the run's input goes (or went) to, once known: the one a 404 may say the provider lost.
        self.session: RemoteSession | None = None

    def fence(self):
        return services.fenced(self.lease)

    def drive(self) -> None:
        session = self.session = self._session_with_input()
        if session is None:
            return  # parked for reconciliation
        with LiveStream(self.gateway, session.remote_id) as live:
            self.heartbeat.on_lost(live.wake)
            sending = not self.input_sent
            if sending:
                self._send_input(session, live)
            else:
                live.wait_connected()
            # A stream open since before the message was sent carries its turn from the start: the first deltas
            # are projected as they come, and the truth is read once the stream ends an item of the reply or the
            # turn, asks for an action, or falls quiet.
            self._follow(session, live, read_truth=not (sending and live.open.is_set()))

    # --- the input: a new session created with it, or one message event ---------------------------

    def _session_with_input(self) -> RemoteSession | None:
        if self.remote_turn.session_id is not None:
            return self.remote_turn.session
        owner = self.run.submission.conversation.owner
        if self.input_sent:
            # An earlier attempt created (or tried to create) a session carrying this input: finish that.
            intent = CreationIntent.objects.filter(run=self.run, kind=IntentKind.SESSION).latest("created_at")
            return self._realise_session(intent)
        if self.claimed.session is not None:
            return self.claimed.session
        try:
            rebyte_services.ensure_saved_agent(owner, self.gateway)
        except rebyte_services.CreationPending as exc:
            self._park(exc)
            return None
        submission = self.run.submission
        parts = run_input.first_input_parts(
            submission, carry=rebyte_services.session_has_history(submission.conversation)
        )
        instructions = run_input.new_session_instructions(submission, device_tools=self.claimed.device_tools)
        with self.fence() as run:
            self.input_sent = services.mark_input_sent(run) is not None
            intent = rebyte_services.open_session_intent(
                run, tools=self.claimed.tools, instructions=instructions, input_parts=parts
            )
        return self._realise_session(intent)

    def _realise_session(self, intent: CreationIntent) -> RemoteSession | None:
        try:
            session = rebyte_services.realise(intent, self.gateway)
        except rebyte_services.CreationPending as exc:
            self._park(exc)
            return None
        with self.fence():
            # Created with this run's input, the session's first turn is this run's: nothing came before it.
            bindings.bind_session(
                self.remote_turn, session, baseline_turn_ids=[], message_sequence=self._message_sequence
            )
        return session

    def _send_input(self, session: RemoteSession, live: LiveStream) -> None:
        """Sends the run's message once no turn of the session is active (input never steers a turn).

        The live stream connects meanwhile; it is waited for before the message leaves, so that it carries the
        message's turn from its start.
        """
        turns = self._wait_until_session_idle(session)
        with self.fence() as run:
            self.input_sent = services.mark_input_sent(run) is not None
            bindings.bind_session(
                self.remote_turn,
                session,
                baseline_turn_ids=[t.id for t in turns],
                message_sequence=self._message_sequence,
            )
        live.wait_connected()
        self.gateway.send_message(
            session.remote_id, run_input.message_parts(self.run.submission), idempotency_key=self._input_key
        )

    @property
    def _message_sequence(self) -> int:
        return self.run.submission.user_message.sequence

    @property
    def _input_key(self) -> str:
        # A staff retry is a new turn: under the first key the provider would answer with the failed one.
        retry = f"-retry-{self.run.retries}" if self.run.retries else ""
        return f"impo-run-{self.run.id}{retry}"

    def _wait_until_session_idle(self, session: RemoteSession) -> list:
        """The session's turns once none is active; a turn left active by an earlier run is cancelled."""
        deadline = time.monotonic() + settings.IMPO_TURN_APPEAR_SECONDS * 3
        while True:
            self.heartbeat.check()
            turns = self.gateway.list_turns(session.remote_id)
            active = [t for t in turns if t.status not in TERMINAL_TURN_STATES]
            if not active:
                return turns
            if time.monotonic() > deadline:
                raise Unavailable(f"turn {active[0].id} stays active", operation="list_turns")
            for turn in active:
                logger.warning("run %s: cancelling turn %s left active in %s", self.run.id, turn.id, session.remote_id)
                self.gateway.send_cancel(session.remote_id, idempotency_key=f"impo-cancel-stale-{turn.id}")
            pause(settings.IMPO_PROVIDER_POLL_SECONDS)

    def _park(self, exc: rebyte_services.CreationPending) -> None:
        with self.fence() as run:
            bindings.wait_for_intent(self.remote_turn, exc.intent)
            services.await_reconciliation(run, reason=str(exc))

    # --- following the turn -----------------------------------------------------------------------

    def _follow(self, session: RemoteSession, live: LiveStream, *, read_truth: bool) -> None:
        last_resend = time.monotonic()
        followed = None  # the run's turn as last read, while it streams its reply
        read_items_only = False
        while True:
            self.heartbeat.check()
            if read_truth:
                turn = followed if read_items_only else self._find_turn(session)
                followed = turn if turn is not None and turn.status in _STREAMING_TURN_STATES else None
                if turn is None:
                    if self._input_was_a_message(session) and (
                        time.monotonic() - last_resend > settings.IMPO_TURN_APPEAR_SECONDS
                    ):
                        # Its 202 may have been lost before the provider saw it: the same key makes this safe.
                        self.gateway.send_message(
                            session.remote_id,
                            run_input.message_parts(self.run.submission),
                            idempotency_key=self._input_key,
                        )
                        last_resend = time.monotonic()
                elif self._apply_truth(session, turn):
                    return
            events = live.drain(self.unprojected.wait_seconds(live.quiet_seconds()))
            if not events and self.unprojected.pending:  # the window ended, not the stream's activity
                self._project_pending()
                read_truth = False
            else:
                # A batch that ends the turn is not projected from the stream: the truth read next brings the same
                # text, in the transaction that ends the run.
                applied = any(event.type in _TURN_END_EVENTS for event in events) or self._apply_live(events)
                asks = any(_asks_for_truth(event) for event in events)
                # Deltas of an item whose start this stream did not see cannot be placed (a first message's: its
                # session began its turn): the items can. The turn is not read again for them while it streams.
                read_truth = not events or not applied or asks
                read_items_only = bool(events) and not asks and followed is not None
            if self.cancel_seen and not self.remote_turn.cancel_sent_at:
                self._send_cancel(session)

    def _input_was_a_message(self, session: RemoteSession) -> bool:
        """False when the input went with the session's create: resending it as a message would repeat it."""
        return session.intent.run_id != self.run.id

    def _find_turn(self, session: RemoteSession):
        turns = self.gateway.list_turns(session.remote_id)
        if self.remote_turn.turn_id:
            return next((t for t in turns if t.id == self.remote_turn.turn_id), None)
        new = [t for t in turns if self._is_new_turn(t)]
        if not new:
            return None
        if len(new) > 1:
            logger.error("run %s: %d new turns in %s; taking the first", self.run.id, len(new), session.remote_id)
        self._bind_turn(new[0].id)
        return new[0]

    def _is_new_turn(self, turn) -> bool:
        return turn.id not in self.remote_turn.baseline_turn_ids and not turn.subagent_id

    def _bind_turn(self, turn_id: str) -> None:
        # Saved with the next projection: a successor that finds it unsaved finds the same turn against the same
        # baseline, since no other run of the conversation sends input until this one ends.
        self.remote_turn.turn_id = turn_id

    def _apply_truth(self, session: RemoteSession, turn) -> bool:
        """Projects what the items hold, answers waiting function calls, ends the run on a terminal turn.

        True once this worker is done with the run: it ended, or it was parked for a call's approval.
        The turn is read before the items, so the items of a turn seen terminal are complete.
        """
        items = self.gateway.list_items(session.remote_id)
        if self.provider_failures:
            # The provider answers again: the next outage backs off from the start.
            with self.fence() as run:
                self.provider_failures = services.note_provider_recovered(run)
        mine = [item for item in items if getattr(item, "turn_id", None) == turn.id]
        messages = [item for item in mine if item.type == "message" and item.role == "assistant"]
        self.unprojected.take({m.id: (m.output_text, m.status != "in_progress") for m in messages})
        state = TERMINAL_TURN_STATES.get(turn.status)
        if state is not None:
            failure = turn.error or RunError(ErrorCode.TURN_FAILED, "")  # a failed turn's own code passes through
            error = RunError(failure.code, failure.message) if state == RunState.FAILED else None

            def finish(run: services.FencedRun) -> None:
                if state == RunState.COMPLETED:
                    rebyte_services.record_completed_turn(session, items=items, now=timezone.now())
                services.finish_in_transaction(run, state, error=error)

            self._project_pending(then=finish)
            return True
        self._project_pending(at_once=turn.status == "waiting")  # text before a call goes before the call
        self._relay_cancel(session, turn)
        if turn.status == "waiting":
            remote = self.gateway.get_session(session.remote_id)
            actions = [a for a in remote.required_actions if a.type == "function_call" and a.turn_id == turn.id]
            return self._answer(session, turn.id, actions)
        return False

    def _apply_live(self, events: list) -> bool:
        """Takes the deltas of items seen from their start, projected when due; False if some could not be placed."""
        placed_all = True
        for event in events:
            if event.type == "agent.session.turn.created" and not self.remote_turn.turn_id:
                if self._is_new_turn(event.turn):
                    self._bind_turn(event.turn.id)
            elif event.type == "agent.session.turn.item.added" and event.item.type == "message":
                if event.item.role == "assistant" and event.turn_id == self.remote_turn.turn_id:
                    self.live_text[event.item.id] = event.item.output_text
            elif event.type == "agent.session.turn.output_text.delta":
                if event.item_id in self.live_text:
                    self.live_text[event.item_id] += event.delta
                    self.unprojected.take({event.item_id: (self.live_text[event.item_id], False)})
                else:
                    placed_all = False
        self._project_pending()
        return placed_all

    def _project_pending(self, *, then: Callable[[services.FencedRun], None] | None = None, at_once=False) -> None:
        """One fenced transaction for everything read and not yet projected of the items (text, completed), when
        due (at once for the run's end, `then`, or when asked), with the turn's binding."""
        texts = self.unprojected.due(at_once=at_once or then is not None)
        if texts is None:
            return
        outputs, progress = [], {}
        for item_id, (text, done) in texts.items():
            already = self.remote_turn.projected.get(item_id, 0)
            completed = done and item_id not in self.remote_turn.completed_items
            if len(text) > already or completed:
                outputs.append(
                    services.Output(f"text-{item_id}", text[already:], completed_text=text if completed else None)
                )
                progress[item_id] = (max(already, len(text)), completed)
        if then is None:
            if not outputs:
                return
            # With the process's other runs, in its next group commit.
            noted = (self.remote_turn, self.remote_turn.turn_id, progress) if progress else None
            run = group_commit.project(self.lease, outputs, progress=noted)
            self.cancel_seen = run.cancel_requested_at is not None
        else:
            with self.fence() as run:
                self.cancel_seen = run.cancel_requested_at is not None
                services.project_output(run, outputs)
                if progress:
                    bindings.note_projected(self.remote_turn, turn_id=self.remote_turn.turn_id, progress=progress)
                then(run)
        self.unprojected.projected()

    def _relay_cancel(self, session: RemoteSession, turn) -> None:
        if self.remote_turn.cancel_sent_at or turn.status in TERMINAL_TURN_STATES:
            return
        if not selectors.cancel_requested(self.run.id):
            return
        self._send_cancel(session)

    def _send_cancel(self, session: RemoteSession) -> None:
        self.gateway.send_cancel(session.remote_id, idempotency_key=f"impo-cancel-{self.run.id}")
        with self.fence():
            bindings.note_cancel_sent(self.remote_turn)

    # --- function calls ---------------------------------------------------------------------------

    def _answer(self, session: RemoteSession, turn_id: str, actions: list) -> bool:
        """Settles and sends each call's result; True when a call awaits approval and the run was parked."""
        for action in actions:
            with self.fence() as run:
                call, events = tool_services.record_call(
                    run, call_id=action.call_id, name=action.name, arguments=action.arguments
                )
                run.append(events)
                if call.state == ToolCallState.AWAITING_APPROVAL:
                    services.await_approval(run)
            if call.state == ToolCallState.AWAITING_APPROVAL:
                logger.info("run %s: call %s awaits approval; the run is parked", self.run.id, call.call_id)
                return True
            call = ToolCall.objects.select_related("run__submission__owner").get(id=call.id)
            receipt = dispatch.settle(call, fence=self.fence, check=self.heartbeat.check)
            if receipt is None:
                receipt = self._await_device(call)
            if receipt.submitted_at is not None:
                continue  # acknowledged already; the provider has not caught up with it yet
            if selectors.cancel_requested(self.run.id):
                continue  # the agent gets no more input; the relayed cancel ends the turn
            result = receipt.result
            self.gateway.send_tool_result(
                session.remote_id,
                turn_id=turn_id,
                call_id=action.call_id,
                success="error" not in result,
                text=tool_services.tool_result_text(result),
                idempotency_key=f"impo-tool-result-{call.id}",
            )
            with self.fence() as run:
                tool_services.mark_submitted(run, [receipt.id])
        return False

    def _await_device(self, call: ToolCall) -> ToolReceipt:
        """Waits, holding the lease, until the device answers, the deadline passes or the run is cancelled."""
        with self.fence() as run:
            services.enter_waiting_device(run)
        while True:
            self.heartbeat.check()
            receipt = dispatch.device_receipt(
                call, fence=self.fence, cancel_requested=selectors.cancel_requested(self.run.id)
            )
            if receipt is not None:
                with self.fence() as run:
                    services.leave_waiting_device(run)
                return receipt
            pause(DEVICE_POLL_SECONDS)
