"""Following a run's turn: the live stream wakes the driver and carries deltas; the turn, the session's items (by
item id) and `required_actions` are the truth, read on start, on resume and whenever the stream is quiet.

What one read brings is projected in one fenced transaction (or the process's group commit) with the count of
characters projected per item, so a successor after a crash projects only the rest (docs/design.md §1.5, §5).
The turn's reasoning summaries, read the same way, go with those projections as transient progress (`reasoning`).
"""

import enum
import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from core.error_codes import ErrorCode, RunError
from rebyte import bindings, sessions
from rebyte.models import RemoteSession
from runtime import selectors
from runtime.execution import reasoning, run_input
from runtime.execution.coalescing import Coalescer
from runtime.execution.drive_state import DriveState
from runtime.execution.function_calls import FunctionCalls
from runtime.execution.group_commit import group_commit
from runtime.execution.live_stream import STREAM_ENDED, LiveStream
from runtime.execution.reasoning import Summaries
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
    if event.type == "agent.session.turn.item.done" and event.item_type == "reasoning":
        return False  # its summary was progress, read from the stream; nothing of it is in the reply
    if event.type == "agent.session.turn.item.done" and event.item_type == "message":
        # The user's input recorded as an item of the turn: nothing to project yet.
        return event.item_role != "user"
    return event.type in _TRUTH_EVENTS


class Step(enum.Enum):
    """The states of following a turn: each step does its part and names the next."""

    # Read the turn (finding and binding it while it is new), then the session's items; end the run on a terminal
    # turn and answer the function calls of a waiting one.
    READ_TURN = "read_turn"
    # Read the items of the turn followed, which still streams, without reading the turn again: its deltas arrived
    # on the stream, but some could not be placed (their item began before this stream).
    READ_ITEMS = "read_items"
    # Wait for the live stream's events, or for the end of the window that coalesces the reply's projections.
    LISTEN = "listen"
    # The run ended, or was parked for a call's approval: this worker is done with it.
    DONE = "done"


class Following:
    """The driver's phase that follows the turn to its end on `live`, taking the drive's state; function calls go to
    `calls`. What it reads and has not projected yet is its own."""

    def __init__(self, state: DriveState, session: RemoteSession, live: LiveStream, calls: FunctionCalls):
        self.state = state
        self.session = session
        self.live = live
        self.calls = calls
        self.live_text: dict[str, str] = {}  # the text of each reply item this stream saw from its start
        self.unprojected = Coalescer()  # the reply read since its last projection
        self.summaries = Summaries()  # the turn's reasoning, read from the live stream (and the items)
        self.followed = None  # the run's turn as last read, while it streams its reply
        self.last_resend = time.monotonic()
        self.quiet = _QuietReads()
        # The turn's id as the binding last wrote it (as claimed, then with each projection of its progress).
        self.saved_turn_id = state.remote_turn.turn_id

    def follow(self, *, read_truth: bool) -> None:
        """Follows the turn until the run ends or is parked; `read_truth`: the truth is read before listening."""
        steps = {Step.READ_TURN: self._read_turn, Step.READ_ITEMS: self._read_items, Step.LISTEN: self._listen}
        step = Step.READ_TURN if read_truth else Step.LISTEN
        while step is not Step.DONE:
            self.state.heartbeat.check()
            step = steps[step]()

    def _read_turn(self) -> Step:
        return self._read_truth(self._find_turn())

    def _read_items(self) -> Step:
        return self._read_truth(self.followed)

    def _read_truth(self, turn) -> Step:
        self.followed = turn if turn is not None and turn.status in _STREAMING_TURN_STATES else None
        if turn is None:
            self._resend_input_if_unseen()
            return Step.LISTEN
        return Step.DONE if self._apply_truth(turn) else Step.LISTEN

    def _resend_input_if_unseen(self) -> None:
        """The input message again when no turn of it has appeared for a while (same key: safe to repeat)."""
        if not self._input_was_a_message() or time.monotonic() - self.last_resend <= settings.IMPO_TURN_APPEAR_SECONDS:
            return
        # Its 202 may have been lost before the provider saw it.
        state = self.state
        state.gateway.send_message(
            self.session.remote_id,
            run_input.message_parts(state.run.submission, state.run.file_ids),
            idempotency_key=state.input_key,
        )
        self.last_resend = time.monotonic()

    def _listen(self) -> Step:
        unprojected = self.unprojected
        events = self.live.drain(unprojected.wait_seconds(self.live.quiet_seconds()), gather=unprojected.pending)
        if not events and unprojected.pending:  # the window ended, not the stream's activity
            self._project_pending()
            step = Step.LISTEN
        else:
            step = self._after_listening(events)
        if self.state.cancel_seen and not self.state.remote_turn.cancel_sent_at:
            self._send_cancel()
        return step

    def _after_listening(self, events: list) -> Step:
        """What the stream's events call for: the next deltas, the truth, or the items only."""
        # A batch that ends the turn is not projected from the stream: the truth read next brings the same text, in
        # the transaction that ends the run.
        applied = any(event.type in _TURN_END_EVENTS for event in events) or self._apply_live(events)
        asks = any(_asks_for_truth(event) for event in events)
        if events or not self.live.open.is_set():
            self.quiet.reset()
            read = not events or not applied or asks
        else:  # an open stream fell quiet
            read = self.quiet.read_due() or self._cancel_to_relay()
        if not read:
            return Step.LISTEN
        # Deltas of an item whose start this stream did not see cannot be placed (after the stream broke, or on a
        # successor's stream): the items can. The turn is not read again for them while it streams.
        if events and not asks and self.followed is not None:
            return Step.READ_ITEMS
        return Step.READ_TURN

    def _input_was_a_message(self) -> bool:
        """False when the input went with the session's create: resending it as a message would repeat it."""
        return self.session.intent.run_id != self.state.run.id

    def _find_turn(self):
        remote_turn = self.state.remote_turn
        turns = self.state.gateway.list_turns(self.session.remote_id)
        if remote_turn.turn_id:
            return next((t for t in turns if t.id == remote_turn.turn_id), None)
        new = [t for t in turns if self._is_new_turn(t.id, t.subagent_id)]
        if not new:
            return None
        if len(new) > 1:
            run_id, session_id = self.state.run.id, self.session.remote_id
            logger.error("run %s: %d new turns in %s; taking the first", run_id, len(new), session_id)
        self._bind_turn(new[0].id)
        return new[0]

    def _is_new_turn(self, turn_id: str, subagent_id: str | None) -> bool:
        return turn_id not in self.state.remote_turn.baseline_turn_ids and not subagent_id

    def _bind_turn(self, turn_id: str) -> None:
        # Saved with the next projection: a successor that finds it unsaved finds the same turn against the same
        # baseline, since no other run of the conversation sends input until this one ends.
        self.state.remote_turn.turn_id = turn_id

    def _apply_truth(self, turn) -> bool:
        """Projects what the items hold, answers waiting function calls, ends the run on a terminal turn.

        True once this worker is done with the run: it ended, or it was parked for a call's approval.
        The turn is read before the items, so the items of a turn seen terminal are complete.
        """
        drive, session = self.state, self.session
        items = drive.gateway.list_items(session.remote_id)
        if drive.provider_failures:
            # The provider answers again: the next outage backs off from the start.
            with drive.fence() as run:
                drive.provider_failures = lifecycle.note_provider_recovered(run)
        mine = [item for item in items if getattr(item, "turn_id", None) == turn.id]
        messages = [item for item in mine if item.type == "message" and item.role == "assistant"]
        self.unprojected.take({m.id: (m.output_text, m.status != "in_progress") for m in messages})
        if not drive.resumed:
            self.unprojected.take_progress(reasoning.steps_of(mine))
        state = TERMINAL_TURN_STATES.get(turn.status)
        if state is not None:
            failure = turn.error or RunError(ErrorCode.TURN_FAILED, "")  # a failed turn's own code passes through
            retryable = failure.code in RETRYABLE_TURN_ERRORS
            error = RunError(failure.code, failure.message, retryable) if state == RunState.FAILED else None

            # The run's only claim so far, whose stream projected no reasoning, knows there is none to keep.
            reasoned = drive.lease.generation > 1 or self.summaries.said_any

            def finish(run: lifecycle.FencedRun, reply_text_left: str) -> None:
                if state == RunState.COMPLETED:
                    sessions.record_completed_turn(session, items=items, now=timezone.now())
                lifecycle.finish_in_transaction(
                    run, state, error=error, reply_text_left=reply_text_left, reasoned=reasoned
                )

            self._project_pending(then=finish)
            return True
        self._project_pending(at_once=turn.status == "waiting")  # text before a call goes before the call
        self._relay_cancel(turn)
        if turn.status == "waiting":
            remote = drive.gateway.get_session(session.remote_id)
            actions = [a for a in remote.required_actions if a.type == "function_call" and a.turn_id == turn.id]
            return self.calls.answer(session, turn.id, actions)
        return False

    def _apply_live(self, events: list) -> bool:
        """Takes the deltas of items seen from their start, projected when due; False if some could not be placed."""
        placed_all = True
        remote_turn = self.state.remote_turn
        for event in events:
            if event is STREAM_ENDED:
                self.live_text.clear()  # what follows comes from another stream, with a gap before it
            elif event.type == "agent.session.turn.created" and not remote_turn.turn_id:
                if self._is_new_turn(event.turn_id, event.subagent_id):
                    self._bind_turn(event.turn_id)
            elif event.type == "agent.session.turn.item.added" and event.item_type == "message":
                if event.item_role == "assistant" and event.turn_id == remote_turn.turn_id:
                    self.live_text[event.item_id] = event.text
            elif event.type == "agent.session.turn.output_text.delta":
                if event.item_id in self.live_text:
                    self.live_text[event.item_id] += event.text
                    self.unprojected.take({event.item_id: (self.live_text[event.item_id], False)})
                else:
                    placed_all = False
            elif event.type in reasoning.SUMMARY_EVENTS and event.turn_id == remote_turn.turn_id:
                step = self.summaries.read(event)
                if step is None:
                    placed_all = False  # a part begun before this stream: the items have it
                else:
                    self.unprojected.take_progress({step[0]: step[1:]})
        self._project_pending()
        return placed_all

    def _project_pending(
        self, *, then: Callable[[lifecycle.FencedRun, str], None] | None = None, at_once=False
    ) -> None:
        """One fenced transaction for everything read and not yet projected of the items (text, completed), when
        due (at once for the run's end, `then`, given the run and the reply's text it appends), with the turn's
        binding; and, before the run's end, the reasoning read meanwhile (it came before the text it is projected
        with)."""
        due = self.unprojected.due(at_once=at_once or then is not None)
        if due is None:
            return
        texts, steps = due
        state, remote_turn = self.state, self.state.remote_turn
        outputs: list = self.summaries.unsaid(steps) if then is None else []
        progress = {}
        said = any(remote_turn.projected.values())
        for item_id, (text, done) in texts.items():
            already = remote_turn.projected.get(item_id, 0)
            completed = done and item_id not in remote_turn.completed_items
            if len(text) > already or completed:
                delta = text[already:]
                if delta and not already and said:
                    delta = projection.PART_BREAK + delta
                said = said or bool(delta)
                outputs.append(projection.Output(f"text-{item_id}", delta, completed_text=text if completed else None))
                progress[item_id] = (max(already, len(text)), completed)
        if then is None:
            if not outputs:
                return
            # With the process's other runs, in its next group commit.
            noted = (remote_turn, remote_turn.turn_id, progress) if progress else None
            run = group_commit.project(state.lease, outputs, progress=noted)
            state.cancel_seen = run.cancel_requested_at is not None
            if noted:
                self.saved_turn_id = remote_turn.turn_id
        else:
            with state.fence() as run:
                state.cancel_seen = run.cancel_requested_at is not None
                reply_text_left = projection.project_ending_output(run, outputs)
                # At the run's end the binding is written only for a turn id it does not hold yet (staff find a run
                # by it, and it keeps one run per turn): how much was projected matters to no one once the run ended.
                if progress and remote_turn.turn_id != self.saved_turn_id:
                    bindings.note_projected(remote_turn, turn_id=remote_turn.turn_id, progress=progress)
                then(run, reply_text_left)
        self.unprojected.projected()

    def _cancel_to_relay(self) -> bool:
        return not self.state.remote_turn.cancel_sent_at and selectors.cancel_requested(self.state.run.id)

    def _relay_cancel(self, turn) -> None:
        if turn.status not in TERMINAL_TURN_STATES and self._cancel_to_relay():
            self._send_cancel()

    def _send_cancel(self) -> None:
        state = self.state
        state.gateway.send_cancel(self.session.remote_id, idempotency_key=f"impo-cancel-{state.run.id}")
        with state.fence():
            bindings.note_cancel_sent(state.remote_turn)


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
