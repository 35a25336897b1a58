"""A provider that lost what Impo holds (docs/design.md §5): a 404 for an agent or a session is an answer, not a doubt.

Confirmed by reading the resource itself (a 404 to an input event may name a turn), the binding is marked gone and
the run is given back at once with its input to go again: its next claim finds no usable session and creates one
deliberately, under an intent of its own (with a new agent first, when the agent is the one lost), carrying the
conversation's last completed turns. One line in the run's history says so. 5xx, timeouts and lost answers never
get here: they back off, or park the run for reconciliation.
"""

import logging

from django.utils import timezone

from core.error_codes import ErrorCode
from rebyte import bindings
from rebyte import sessions as rebyte_sessions
from rebyte.client import RebyteGateway
from rebyte.failures import ProviderError, Refused
from rebyte.models import RemoteSession
from runtime.services import claims, lifecycle

logger = logging.getLogger(__name__)


def started_over_if_lost(lease, session: RemoteSession | None, refusal: Refused, gateway: RebyteGateway) -> bool:
    """After a refusal from a call on the run's session: starts the run over if the session is gone; False when the
    refusal proves no loss (the caller ends the run as refused)."""
    if refusal.status != 404 or session is None:
        return False
    try:
        gone = rebyte_sessions.session_is_gone(session, gateway)
    except ProviderError as exc:
        # Asking brought no answer: an outage like any, backed off without deciding anything.
        cause = f"provider unavailable: {exc}"
        _quietly(lambda: claims.release_for_provider(lease, cause=cause))
        return True
    if gone:
        start_over(lease, lost=session, reason=ErrorCode.SESSION_NOT_FOUND)
    return gone


def start_over(lease, *, lost: RemoteSession | None, reason: ErrorCode) -> None:
    """Marks the lost session gone (the agent was marked when found lost), drops the run's binding to it and gives
    the run back to start its input over (or ends it, if its owner cancelled it meanwhile)."""
    logger.warning("run %s: %s; it starts over in a new session", lease.run_id, reason)

    def start_input_over() -> None:
        with claims.fenced(lease) as run:
            if lost is not None:
                rebyte_sessions.mark_session_gone(lost, now=timezone.now())
            bindings.unbind_lost_session(lease.run_id)
            lifecycle.start_input_over(run, reason=reason)

    _quietly(start_input_over)


def _quietly(write) -> None:
    try:
        write()
    except claims.LeaseLost as exc:
        logger.warning("could not start over: %s", exc)
