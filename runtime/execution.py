"""Drives one run against the provider, from claim to a terminal state, under a fenced lease.

Provider I/O happens outside transactions; every effect of it is written through a fenced service
call, together with the provider cursor it came from, so a successor resumes exactly where the last
committed write stopped.
"""

import logging
import os
import socket
import threading
import time
import uuid

from django.conf import settings
from django.db import connection
from django.utils import timezone

from rebyte import client as rebyte
from rebyte.provider import provider_client
from rebyte.services import RemoteCreationFailed, RemoteCreationPending, ensure_current_session
from runtime import selectors, services
from runtime.models import Run, RunState
from tools import dispatch
from tools import services as tool_services
from tools.selectors import cancel_requested, catalog_for_run

logger = logging.getLogger(__name__)

STREAM_RESUMES_PER_ATTEMPT = 5


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Heartbeat:
    """Keeps the lease alive while the provider is slow, notices a takeover, and relays cancellation.

    Runs beside the stream reader so that a long wait (a slow tool, a quiet agent) neither lets the
    lease lapse nor delays a cancel until the next provider event.
    """

    CANCEL_CHECK_SECONDS = 0.5

    def __init__(self, lease: services.Lease):
        self._lease = lease
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{lease.run_id}", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()

    def check(self) -> None:
        if self.lost.is_set():
            raise services.LeaseLost(f"run {self._lease.run_id}: heartbeat found the lease taken over")

    def _beat(self):
        interval = settings.IMPO_RUN_LEASE_SECONDS / 3
        next_beat = time.monotonic() + interval
        cancel_relayed = False
        try:
            while not self._stop.wait(min(self.CANCEL_CHECK_SECONDS, interval)):
                if time.monotonic() >= next_beat:
                    services.heartbeat(self._lease)
                    next_beat = time.monotonic() + interval
                if not cancel_relayed:
                    cancel_relayed = self._relay_cancel()
        except services.LeaseLost:
            self.lost.set()
        finally:
            connection.close()

    def _relay_cancel(self) -> bool:
        turn_id = selectors.turn_to_cancel(self._lease.run_id)
        if not turn_id:
            return False
        try:
            with provider_client() as client:
                client.cancel_turn(turn_id)
        except rebyte.RebyteError as exc:
            logger.warning("run %s: cancelling turn %s failed, will retry: %s", self._lease.run_id, turn_id, exc)
            return False
        return True


def execute_run(run_id, worker_id: str) -> None:
    tool_services.reopen_abandoned_device_wait(run_id)
    lease = services.claim_run(run_id, worker_id)
    if lease is None:
        return
    with provider_client() as client, _Heartbeat(lease) as heartbeat:
        try:
            _drive(lease, client, heartbeat)
        except services.LeaseLost as exc:
            logger.warning("stopping: %s", exc)
        except RemoteCreationPending as exc:
            services.await_reconciliation(lease, intent_id=exc.intent.id, reason=str(exc))
        except RemoteCreationFailed as exc:
            services.finish_run(lease, RunState.FAILED, error=("provider_rejected", str(exc), False))
        except (rebyte.RebyteRetryableError, rebyte.RebyteAmbiguousOutcome) as exc:
            logger.warning("run %s: provider unavailable, released for retry: %s", run_id, exc)
            services.release_run(lease, reason=f"provider unavailable: {exc}")
        except rebyte.RebyteError as exc:
            services.finish_run(lease, RunState.FAILED, error=("provider_error", str(exc), False))


def _drive(lease: services.Lease, client: rebyte.RebyteClient, heartbeat: _Heartbeat) -> None:
    run = Run.objects.select_related(
        "submission__conversation__owner", "submission__user_message", "remote_session"
    ).get(id=lease.run_id)
    turn_id = run.remote_turn_id or _start_turn(lease, run, client)
    cursor = run.provider_cursor
    for _ in range(STREAM_RESUMES_PER_ATTEMPT):
        try:
            for event in client.iter_turn_events(turn_id, after=cursor):
                heartbeat.check()
                parked = _apply(lease, run, event, client, heartbeat)
                cursor = event.sequence
                if event.terminal or parked:
                    return
        except rebyte.RebyteStreamInterrupted as exc:
            logger.info("run %s: turn stream interrupted at %s; resuming", run.id, exc.last_sequence)
    raise rebyte.RebyteRetryableError(
        f"turn {turn_id} stream kept breaking ({STREAM_RESUMES_PER_ATTEMPT} resumes)", operation="turn_events"
    )


def _start_turn(lease: services.Lease, run: Run, client: rebyte.RebyteClient) -> str:
    """Creates the run's one remote turn, or finds the one an earlier attempt created."""
    session = run.remote_session
    text = run.submission.user_message.text
    turn = None
    if session is None:
        session = ensure_current_session(run.submission.conversation, client, now=timezone.now())
        services.bind_turn_intent(lease, session.id)
    elif run.turn_requested_at is not None:
        turn = _find_turn(client, session.remote_id, run)
    if turn is None:
        try:
            turn = _create_turn(client, session.remote_id, run)
        except rebyte.RebyteAmbiguousOutcome:
            # Nothing under this run's id means the create never took effect; the same
            # idempotency key makes one more try safe. A second ambiguity ends the attempt, and
            # the next one looks the turn up first (turn_requested_at is saved).
            turn = _find_turn(client, session.remote_id, run) or _create_turn(client, session.remote_id, run)
    services.bind_turn(lease, turn.id, input_characters=len(text))
    return turn.id


def _create_turn(client: rebyte.RebyteClient, session_remote_id: str, run: Run) -> rebyte.Turn:
    tools = [tool.to_provider() for tool in catalog_for_run(run)]
    return client.create_turn(
        session_remote_id, run.submission.user_message.text, tools, {"impo_run_id": str(run.id)}, f"impo-run-{run.id}"
    )


def _find_turn(client: rebyte.RebyteClient, session_remote_id: str, run: Run) -> rebyte.Turn | None:
    found = client.find_turns(session_remote_id, {"impo_run_id": str(run.id)})
    return found[0] if found else None


def _apply(
    lease: services.Lease, run: Run, event: rebyte.TurnEvent, client: rebyte.RebyteClient, heartbeat: _Heartbeat
) -> bool:
    """Applies one provider event; True when the run was parked and this worker must stop."""
    if isinstance(event, rebyte.TurnRequiresAction):
        return _answer_tool_calls(lease, run, event, client, heartbeat)
    if isinstance(event, rebyte.TextDelta):
        services.apply_text_delta(lease, cursor=event.sequence, part_id=f"text-{event.item_id}", delta=event.delta)
    elif isinstance(event, rebyte.MessageCompleted):
        services.apply_message_completed(lease, cursor=event.sequence, part_id=f"text-{event.item_id}", text=event.text)
    elif isinstance(event, rebyte.TurnCompleted):
        services.finish_run(lease, RunState.COMPLETED, cursor=event.sequence)
    elif isinstance(event, rebyte.TurnFailed):
        services.finish_run(
            lease, RunState.FAILED, cursor=event.sequence, error=(event.error.code, event.error.message, False)
        )
    elif isinstance(event, rebyte.TurnCancelled):
        services.finish_run(lease, RunState.CANCELLED, cursor=event.sequence)
    else:
        services.advance_cursor(lease, cursor=event.sequence)
    return False


def _answer_tool_calls(
    lease: services.Lease,
    run: Run,
    event: rebyte.TurnRequiresAction,
    client: rebyte.RebyteClient,
    heartbeat: _Heartbeat,
) -> bool:
    """Dispatches each waiting call and submits its saved receipt; the cursor moves only after all.

    A successor re-reads this event and finds every call already recorded: settled ones get their
    receipt submitted again (the provider deduplicates by call id), unsettled ones continue.
    """
    for action in event.required_actions:
        tool_services.record_call(lease, call_id=action.call_id, name=action.name, raw_arguments=action.arguments)
        receipt = dispatch.settle(lease, action.call_id, check=heartbeat.check)
        if receipt is None:
            return True  # uncertain: settle parked the run for reconciliation
        if cancel_requested(run.id):
            # The agent gets no more input; the relayed cancel ends the turn, and the stream says so.
            continue
        try:
            client.submit_function_call_output(event.turn_id, action.call_id, tool_services.output_text(receipt.result))
        except rebyte.RebyteConflict as exc:
            if exc.code != "turn_not_awaiting_output":
                raise
            # The turn stopped waiting (it was cancelled); its terminal event follows on the stream.
            logger.info("run %s: turn no longer awaits %s", run.id, action.call_id)
            continue
        tool_services.mark_submitted(lease, receipt)
    services.advance_cursor(lease, cursor=event.sequence)
    return False
