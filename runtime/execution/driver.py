"""Drives one run against the provider, from claim to a terminal state, under a fenced lease.

`runtime.execution` is the one package that knows runtime, tools and rebyte together (docs/design.md §1.4, §5;
docs/provider.md); this module claims a run and drives it through its phases, each an object (in a module of its
own) that takes the drive's state, one `drive_state.DriveState`:
- `input_phase`: the run's input reaches its conversation's session exactly once;
- `following`: the live stream and the truth (turn, items, required actions), projected under the lease;
- `function_calls`: results persisted before they are sent back; approvals park the run.
Here: a provider that is unavailable gives the run back with capped backoff (never failing it); one that refuses
fails it (or heals a lost agent or session, `healing`); an unexpected error of ours releases it for another
attempt.
"""

import logging
import os
import socket
import threading
import uuid

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef
from django.utils import timezone

from core import telemetry
from core.error_codes import ErrorCode, RunError
from rebyte import bindings, sessions
from rebyte import services as rebyte_services
from rebyte.client import RebyteGateway
from rebyte.failures import Refused, Unavailable, UnknownOutcome
from rebyte.owner_instructions import instructions_text
from rebyte.provider import provider_gateway
from runtime import attempts, selectors
from runtime.execution import healing
from runtime.execution.drive_state import Claimed, DriveState
from runtime.execution.following import Following
from runtime.execution.function_calls import FunctionCalls
from runtime.execution.heartbeat import HeldLease, process_heartbeat
from runtime.execution.input_phase import InputPhase
from runtime.execution.live_stream import LiveStream
from runtime.models import RunState
from runtime.services import claims
from tools.selectors import catalog_for_run

logger = logging.getLogger(__name__)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def execute_run(run_id, worker_id: str) -> None:
    claimed = _claim(run_id, worker_id)
    telemetry.annotate({"impo.run.claimed": claimed is not None, "impo.worker": worker_id})
    if claimed is None:
        return
    lease = claimed.lease
    with process_heartbeat.held(lease) as heartbeat:
        driver = Driver(claimed, provider_gateway(), heartbeat)
        try:
            with telemetry.span("impo.run.drive", {"impo.run.id": run_id, "impo.run.attempt": lease.attempt}):
                driver.drive()
        except claims.LeaseLost as exc:
            logger.warning("stopping: %s", exc)
        except rebyte_services.CreationRefused as exc:
            _finish_quietly(lease, RunState.FAILED, RunError(ErrorCode.PROVIDER_REJECTED, str(exc)))
        except rebyte_services.AgentGone:
            healing.start_over(lease, lost=None, reason=ErrorCode.AGENT_NOT_FOUND)
        except Refused as exc:
            if not healing.started_over_if_lost(lease, driver.state.session, exc, driver.state.gateway):
                _finish_quietly(lease, RunState.FAILED, RunError(ErrorCode.PROVIDER_ERROR, str(exc)))
        except (Unavailable, UnknownOutcome) as exc:
            _release_quietly(lease, f"provider unavailable: {exc}", provider=True)
        except Exception as exc:
            logger.exception("run %s: unexpected error; released for another attempt", run_id)
            _release_quietly(lease, f"{type(exc).__name__}: {exc}", provider=False)


# A burst of wake-ups (hundreds of runs admitted together) had every thread run its claim at once: they queued for
# the process's pooled connections ahead of the group commit and the heartbeat, and shared the interpreter with the
# threads projecting the replies already streaming, whose text then waited seconds behind the burst. Claims past
# this bound wait here, holding no connection; the first claims still start at once.
_claims_in_flight = threading.BoundedSemaphore(settings.IMPO_CLAIMS_IN_FLIGHT)


def _claim(run_id, worker_id: str) -> Claimed | None:
    """The claim and everything the driver reads before its first provider call, in one transaction."""
    with _claims_in_flight, transaction.atomic(durable=True):
        lease = claims.claim(run_id, worker_id)
        if lease is None:
            return None
        run = selectors.run_to_execute(run_id, owner_instructions=instructions_text(OuterRef("owner_id")))
        remote_turn = bindings.remote_turn_of(run)
        if remote_turn.session_id is not None or run.input_sent_at is not None:
            return Claimed(
                lease, run, remote_turn, tools=None, device_tools=None, session=None, carry=False, instructions=""
            )
        catalog = catalog_for_run(run)
        tools, device_tools = [tool.to_provider() for tool in catalog], [tool.name for tool in catalog if tool.device]
        # A regeneration's input, or an edited message's, goes to a fresh session, which never saw the reply (or the
        # words) it replaces: the provider has no way to take an item out of a session (docs/api.md "Regenerate").
        instructions = run.owner_instructions
        session, carry = sessions.usable_session(
            run.submission.conversation,
            fingerprint=rebyte_services.tools_fingerprint(tools),
            instructions=instructions,
            now=timezone.now(),
            replacing=attempts.starts_afresh(run.submission, regeneration=run.regeneration),
        )
        return Claimed(
            lease,
            run,
            remote_turn,
            tools=tools,
            device_tools=device_tools,
            session=session,
            carry=carry,
            instructions=instructions,
        )


def _finish_quietly(lease, state, error: RunError) -> None:
    try:
        claims.finish_run(lease, state, error=error)
    except claims.LeaseLost as exc:
        logger.warning("could not finish: %s", exc)


def _release_quietly(lease, cause: str, *, provider: bool) -> None:
    try:
        if provider:
            delay = claims.release_for_provider(lease, cause=cause)
            logger.warning("run %s: %s; retrying in %.1f s", lease.run_id, cause, delay)
        else:
            claims.release_after_error(lease, cause=cause)
    except claims.LeaseLost as exc:
        logger.warning("could not release: %s", exc)


class Driver:
    """Drives one claimed run: its input, then its turn to the end, answering the function calls it makes.

    Its state is one `DriveState`; each phase is an object that takes it."""

    def __init__(self, claimed: Claimed, gateway: RebyteGateway, heartbeat: HeldLease):
        self.state = DriveState.of(claimed, gateway, heartbeat)

    def drive(self) -> None:
        state = self.state
        input_phase = InputPhase(state)
        try:
            session = state.session = input_phase.session_with_input()
        finally:
            created, state.created_stream = state.created_stream, None
            if created is not None and state.session is None:  # failed after the create: nobody will read it
                created.finish()
        if session is None:
            return  # parked for reconciliation
        with LiveStream(state.gateway, session.remote_id, created=created) as live:
            state.heartbeat.on_lost(live.wake)
            sending = not state.input_sent
            if sending and not input_phase.send(session, live):
                return  # given back: its owner's instructions changed before its turn started
            if not sending:
                live.wait_connected()
            # A stream open since before the message was sent, or the session's own since its creation with the
            # message, carries its turn from the start: the first deltas are projected as they come, and the truth is
            # read once the stream ends an item of the reply or the turn, asks for an action, or falls quiet.
            from_start = sending or created is not None
            following = Following(state, session, live, FunctionCalls(state))
            following.follow(read_truth=not (from_start and live.open.is_set()))
