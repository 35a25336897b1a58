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

from rebyte import bindings, sessions
from rebyte import services as rebyte_services
from rebyte.client import LiveEvents
from rebyte.failures import Unavailable
from rebyte.models import CreationIntent, IntentKind, RemoteSession
from runtime.execution import run_input
from runtime.execution.following import TERMINAL_TURN_STATES
from runtime.execution.live_stream import LiveStream, pause
from runtime.services import lifecycle

logger = logging.getLogger(__name__)


class InputPhase:
    """The run driver's part that delivers the input (see `driver.RunDriver` for the state it shares)."""

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
        parts = run_input.first_input_parts(submission, carry=sessions.session_has_history(submission.conversation))
        instructions = run_input.new_session_instructions(submission, device_tools=self.claimed.device_tools)
        with self.fence() as run:
            self.input_sent = lifecycle.mark_input_sent(run) is not None
            intent = rebyte_services.open_session_intent(
                run, tools=self.claimed.tools, instructions=instructions, input_parts=parts
            )
        return self._realise_session(intent)

    def _realise_session(self, intent: CreationIntent) -> RemoteSession | None:
        try:
            # Created now, the session answers with its event stream, which the run follows its first turn on.
            session = rebyte_services.realise(intent, self.gateway, on_stream=self._keep_created_stream)
        except rebyte_services.CreationPending as exc:
            self._park(exc)
            return None
        with self.fence():
            # Created with this run's input, the session's first turn is this run's: nothing came before it.
            bindings.bind_session(
                self.remote_turn, session, baseline_turn_ids=[], message_sequences=self._message_sequences
            )
        return session

    def _keep_created_stream(self, events: LiveEvents) -> None:
        self.created_stream = events

    def _send_input(self, session: RemoteSession, live: LiveStream) -> None:
        """Sends the run's message once no turn of the session is active (input never steers a turn).

        The live stream connects meanwhile; it is waited for before the message leaves, so that it carries the
        message's turn from its start.
        """
        turns = self._wait_until_session_idle(session)
        with self.fence() as run:
            self.input_sent = lifecycle.mark_input_sent(run) is not None
            bindings.bind_session(
                self.remote_turn,
                session,
                baseline_turn_ids=[t.id for t in turns],
                message_sequences=self._message_sequences,
            )
        live.wait_connected()
        self.gateway.send_message(
            session.remote_id, run_input.message_parts(self.run.submission), idempotency_key=self._input_key
        )

    @property
    def _message_sequences(self) -> tuple[int, int]:
        submission = self.run.submission
        return submission.user_message.sequence, submission.assistant_message.sequence

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
            lifecycle.await_reconciliation(run, reason=str(exc))
