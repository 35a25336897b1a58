"""Following a run's turn: the live stream wakes the driver and carries deltas; the turn, the session's items (by
item id) and `required_actions` are the truth, read on start, on resume and whenever the stream is quiet.

What one read brings is projected in one fenced transaction (or the process's group commit) with the count of
characters projected per item, so a successor after a crash projects only the rest (docs/design.md §1.5, §5).
The turn's reasoning summaries, read the same way, go with those projections as transient progress (`reasoning`).
"""

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from impo.core.error_codes import ErrorCode, RunError
from rebyte import bindings, sessions
from rebyte.models import RemoteSession
from runtime import selectors
from runtime.execution import reasoning, run_input
from runtime.execution.group_commit import group_commit
from runtime.execution.live_stream import STREAM_ENDED, LiveStream
from runtime.models import RunState
from runtime.services import lifecycle, projection

logger = logging.getLogger(__name__)

# The provider's turn failures (SessionTurnError.code in the `openai` SDK) that a new attempt can get past: the
# service was busy, unreachable or slow. The others (a refused or blocked request, a spent budget, a conversation
# too long, the agent's own failure) fail the same way again, so the run's error says it is not retryable and the
# chat offers no "Try again".
RETRYABLE_TURN_ERRORS = frozenset(
    {
        "rate_limit_exceeded",
        "flex_unavailable",
        "server_overloaded",
        "connection_failed",
        "server_error",
        "request_timeout",
        "sandbox_error",
    }
)
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
# While an open stream stays quiet, the truth is read after its first quiet (QUIET_OPEN_STREAM_SECONDS), then after
# twice as many quiet waits each time, up to this many: a turn that thinks for 20 s before its first word was read
# ten times (its turn and its items through the SDK each time), and 500 such turns used more of a worker host's CPU
# than the same turns streaming a delta a second (bench/RESULTS.md). A cancel is still looked for at every quiet
# wait (one statement), and one asked for reads the truth at once, which relays it.
QUIET_WAITS_BETWEEN_READS_CAP = 4
_TURN_END_EVENTS = frozenset(
    {"agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled"}
)


def _asks_for_truth(event) -> bool:
    if event is STREAM_ENDED:
        return True
    if event.type == "agent.session.turn.item.done" and event.item.type == "reasoning":
        return False  # its summary was progress, read from the stream; nothing of it is in the reply
    if event.type == "agent.session.turn.item.done" and event.item.type == "message":
        # The user's input recorded as an item of the turn: nothing to project yet.
        return event.item.role != "user"
    return event.type in _TRUTH_EVENTS


class Following:
    """The run driver's part that follows its turn to the end (see `driver.RunDriver` for the state it shares)."""

    def _follow(self, session: RemoteSession, live: LiveStream, *, read_truth: bool) -> None:
        last_resend = time.monotonic()
        followed = None  # the run's turn as last read, while it streams its reply
        read_items_only = False
        quiet = _QuietReads()
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
            events = live.drain(self.unprojected.wait_seconds(live.quiet_seconds()), gather=self.unprojected.pending)
            if not events and self.unprojected.pending:  # the window ended, not the stream's activity
                self._project_pending()
                read_truth = False
            else:
                # A batch that ends the turn is not projected from the stream: the truth read next brings the same
                # text, in the transaction that ends the run.
                applied = any(event.type in _TURN_END_EVENTS for event in events) or self._apply_live(events)
                asks = any(_asks_for_truth(event) for event in events)
                # Deltas of an item whose start this stream did not see cannot be placed (after the stream broke, or
                # on a successor's stream): the items can. The turn is not read again for them while it streams.
                if events or not live.open.is_set():
                    quiet.reset()
                    read_truth = not events or not applied or asks
                else:
                    read_truth = quiet.read_due() or self._cancel_to_relay()
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
                self.provider_failures = lifecycle.note_provider_recovered(run)
        mine = [item for item in items if getattr(item, "turn_id", None) == turn.id]
        messages = [item for item in mine if item.type == "message" and item.role == "assistant"]
        self.unprojected.take({m.id: (m.output_text, m.status != "in_progress") for m in messages})
        if not self.resumed:
            self.unprojected.take_progress(reasoning.steps_of(mine))
        state = TERMINAL_TURN_STATES.get(turn.status)
        if state is not None:
            failure = turn.error or RunError(ErrorCode.TURN_FAILED, "")  # a failed turn's own code passes through
            retryable = failure.code in RETRYABLE_TURN_ERRORS
            error = RunError(failure.code, failure.message, retryable) if state == RunState.FAILED else None

            def finish(run: lifecycle.FencedRun) -> None:
                if state == RunState.COMPLETED:
                    sessions.record_completed_turn(session, items=items, now=timezone.now())
                lifecycle.finish_in_transaction(run, state, error=error)

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
            if event is STREAM_ENDED:
                self.live_text.clear()  # what follows comes from another stream, with a gap before it
            elif event.type == "agent.session.turn.created" and not self.remote_turn.turn_id:
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
            elif event.type in reasoning.SUMMARY_EVENTS and event.turn_id == self.remote_turn.turn_id:
                step = self.summaries.read(event)
                if step is None:
                    placed_all = False  # a part begun before this stream: the items have it
                else:
                    self.unprojected.take_progress({step[0]: step[1:]})
        self._project_pending()
        return placed_all

    def _project_pending(self, *, then: Callable[[lifecycle.FencedRun], None] | None = None, at_once=False) -> None:
        """One fenced transaction for everything read and not yet projected of the items (text, completed), when
        due (at once for the run's end, `then`, or when asked), with the turn's binding; and, before the run's end,
        the reasoning read meanwhile (it came before the text it is projected with)."""
        due = self.unprojected.due(at_once=at_once or then is not None)
        if due is None:
            return
        texts, steps = due
        outputs: list = self.summaries.unsaid(steps) if then is None else []
        progress = {}
        for item_id, (text, done) in texts.items():
            already = self.remote_turn.projected.get(item_id, 0)
            completed = done and item_id not in self.remote_turn.completed_items
            if len(text) > already or completed:
                outputs.append(
                    projection.Output(f"text-{item_id}", text[already:], completed_text=text if completed else None)
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
                projection.project_output(run, outputs)
                if progress:
                    bindings.note_projected(self.remote_turn, turn_id=self.remote_turn.turn_id, progress=progress)
                then(run)
        self.unprojected.projected()

    def _cancel_to_relay(self) -> bool:
        return not self.remote_turn.cancel_sent_at and selectors.cancel_requested(self.run.id)

    def _relay_cancel(self, session: RemoteSession, turn) -> None:
        if turn.status not in TERMINAL_TURN_STATES and self._cancel_to_relay():
            self._send_cancel(session)

    def _send_cancel(self, session: RemoteSession) -> None:
        self.gateway.send_cancel(session.remote_id, idempotency_key=f"impo-cancel-{self.run.id}")
        with self.fence():
            bindings.note_cancel_sent(self.remote_turn)


class _QuietReads:
    """Which of an open stream's quiet waits (QUIET_OPEN_STREAM_SECONDS each) end with a read of the truth: the
    first, then after 2, 4, ... more, up to QUIET_WAITS_BETWEEN_READS_CAP, until the stream speaks again."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._waits = 0
        self._next_read = 1
        self._step = 1

    def read_due(self) -> bool:
        self._waits += 1
        if self._waits < self._next_read:
            return False
        self._step = min(self._step * 2, QUIET_WAITS_BETWEEN_READS_CAP)
        self._next_read = self._waits + self._step
        return True
