"""A run's input phase: its input reaches its conversation's session exactly once.

Either as the first input of a new session, created through a creation intent persisted first (docs/design.md §5)
and answered with the session's event stream, which carries that first turn from its start; or as one
`input.message` event keyed `impo-run-<run id>`, sent only while no turn of the session is active and after the
session's turns were recorded as the baseline its turn is new against. A create whose outcome is unknown
parks the run until reconciliation decides.
"""

import logging
import time

from django.conf import settings
from django.utils import timezone

from rebyte import agents, bindings, sessions
from rebyte import services as rebyte_services
from rebyte.client import LiveEvents
from rebyte.failures import Unavailable
from rebyte.models import CreationIntent, IntentKind, RemoteSession
from rebyte.owner_instructions import held_instructions
from runtime.execution import run_input
from runtime.execution.drive_state import DriveState
from runtime.execution.following import TERMINAL_TURN_STATES
from runtime.execution.live_stream import LiveStream, pause
from runtime.services import lifecycle

logger = logging.getLogger(__name__)

INSTRUCTIONS_CHANGED_CAUSE = "the owner's instructions changed before the turn started: it starts on a new agent"


class InputPhase:
    """The driver's phase that delivers the run's input, taking the drive's state."""

    def __init__(self, state: DriveState):
        self.state = state

    def session_with_input(self) -> RemoteSession | None:
        """The session the run's input goes (or went) to; None when the run was parked for reconciliation.

        A session created here with the input leaves its event stream in `state.created_stream`."""
        state = self.state
        if state.remote_turn.session_id is not None:
            return state.remote_turn.session
        owner = state.run.submission.conversation.owner
        if state.input_sent:
            # An earlier attempt created (or tried to create) a session carrying this input: finish that.
            intent = CreationIntent.objects.filter(run=state.run, kind=IntentKind.SESSION).latest("created_at")
            return self._realise_session(intent)
        if state.claimed.session is not None:
            return state.claimed.session
        try:
            agent = agents.ensure_saved_agent(
                owner, state.gateway, instructions=state.claimed.instructions, between_looks=self._between_looks
            )
        except rebyte_services.CreationPending as exc:
            self._park(exc)
            return None
        submission = state.run.submission
        parts = run_input.first_input_parts(submission, carry=state.claimed.carry, file_ids=state.run.file_ids)
        instructions = run_input.new_session_instructions(
            submission, device_tools=state.claimed.device_tools, owner_instructions=agent.owner_instructions
        )
        with state.fence() as run:
            # The turn starts here, on the owner's instructions as they stand (docs/locking.md): changed since the
            # agent was made, it starts again on a new one.
            if held_instructions(owner.pk) != agent.owner_instructions:
                lifecycle.requeue_to_start_afresh(run, cause=INSTRUCTIONS_CHANGED_CAUSE)
                return None
            state.input_sent = lifecycle.mark_input_sent(run) is not None
            intent = rebyte_services.open_session_intent(
                run, agent=agent, tools=state.claimed.tools, instructions=instructions, input_parts=parts
            )
        return self._realise_session(intent, counted=True, agent=agent)

    def _between_looks(self, seconds: float) -> None:
        self.state.heartbeat.check()
        pause(seconds)

    def _realise_session(self, intent: CreationIntent, *, counted=False, agent=None) -> RemoteSession | None:
        """The session of `intent` (`counted`, `agent` as `rebyte.services.realise` takes them), adopted and bound to
        the run in one fenced transaction."""
        try:
            # Created now, the session answers with its event stream, which the run follows its first turn on.
            return rebyte_services.realise(
                intent,
                self.state.gateway,
                on_stream=self._keep_created_stream,
                input_content=run_input.provider_content,
                counted=counted,
                agent=agent,
                run_fence=self.state.fence,
                then=self._bind_created,
            )
        except rebyte_services.CreationPending as exc:
            self._park(exc)
            return None

    def _bind_created(self, session: RemoteSession) -> None:
        # Created with this run's input, the session's first turn is this run's: nothing came before it.
        bindings.bind_session(
            self.state.remote_turn, session, baseline_turn_ids=[], message_sequences=self._message_sequences
        )

    def _keep_created_stream(self, events: LiveEvents) -> None:
        self.state.created_stream = events

    def send(self, session: RemoteSession, live: LiveStream) -> bool:
        """Sends the run's message once no turn of the session is active (input never steers a turn); False when
        the session's agent no longer has its owner's instructions: the session is retired and the run given back.

        The live stream connects meanwhile; it is waited for before the message leaves, so that it carries the
        message's turn from its start.
        """
        state = self.state
        turns = self._wait_until_session_idle(session)
        with state.fence() as run:
            if sessions.is_stale(session, held_instructions(state.run.submission.owner_id)):
                sessions.retire_session(session, reason=sessions.INSTRUCTIONS_CHANGED, now=timezone.now())
                lifecycle.requeue_to_start_afresh(run, cause=INSTRUCTIONS_CHANGED_CAUSE)
                return False
            state.input_sent = lifecycle.mark_input_sent(run) is not None
            bindings.bind_session(
                state.remote_turn,
                session,
                baseline_turn_ids=[t.id for t in turns],
                message_sequences=self._message_sequences,
            )
        live.wait_connected()
        state.gateway.send_message(
            session.remote_id,
            run_input.message_parts(state.run.submission, state.run.file_ids),
            idempotency_key=state.input_key,
        )
        return True

    @property
    def _message_sequences(self) -> tuple[int, int]:
        submission = self.state.run.submission
        return submission.user_message.sequence, submission.assistant_message.sequence

    def _wait_until_session_idle(self, session: RemoteSession) -> list:
        """The session's turns once none is active; a turn left active by an earlier run is cancelled."""
        state = self.state
        deadline = time.monotonic() + settings.IMPO_TURN_APPEAR_SECONDS * 3
        while True:
            state.heartbeat.check()
            turns = state.gateway.list_turns(session.remote_id)
            active = [t for t in turns if t.status not in TERMINAL_TURN_STATES]
            if not active:
                return turns
            if time.monotonic() > deadline:
                raise Unavailable(f"turn {active[0].id} stays active", operation="list_turns")
            for turn in active:
                logger.warning("run %s: cancelling turn %s left active in %s", state.run.id, turn.id, session.remote_id)
                state.gateway.send_cancel(session.remote_id, idempotency_key=f"impo-cancel-stale-{turn.id}")
            pause(settings.IMPO_PROVIDER_POLL_SECONDS)

    def _park(self, exc: rebyte_services.CreationPending) -> None:
        with self.state.fence() as run:
            bindings.wait_for_intent(self.state.remote_turn, exc.intent)
            needs_staff = CreationIntent.objects.filter(id=exc.intent.id, needs_staff=True).exists()
            lifecycle.await_reconciliation(run, reason=str(exc), needs_staff=needs_staff)
