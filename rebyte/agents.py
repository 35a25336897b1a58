"""The owner's agent (docs/provider.md): the one current agent each owner's turns go to, created at most once under
a creation intent (`rebyte.services`), and created again when the owner's instructions change, since an agent keeps
its instructions for life (`rebyte.owner_instructions`).
"""

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rebyte import locks
from rebyte.client import RebyteGateway
from rebyte.failures import Unavailable
from rebyte.models import AgentGoneReason, CreationIntent, IntentKind, IntentState, SavedAgent
from rebyte.services import current_agent, realise

logger = logging.getLogger(__name__)


# How often a run waiting for another run's agent create reads how it went.
IN_FLIGHT_POLL_SECONDS = 0.1


def ensure_saved_agent(
    owner, gateway: RebyteGateway, *, instructions: str, between_looks: Callable[[float], None] = time.sleep
) -> SavedAgent:
    """The owner's current agent, created with the owner's `instructions` if there is none: one created with others is
    retired first (an agent keeps its instructions for life). An agent create in doubt is not waited for: another is
    created deliberately, and the doubtful one, if found later, is recorded and left unused.

    A create another run is sending is waited for, `between_looks(seconds)` between two reads of its intent (a
    driver's keeps its lease and holds no connection meanwhile)."""
    for _ in range(2):
        agent = _agent_with(owner, instructions, gateway, between_looks)
        if agent.owner_instructions == instructions:
            return agent
        # A create already in flight with the instructions before: its agent, retired at the next look.
    raise Unavailable(f"the instructions of user {owner.pk} changed while their agent was created", operation="create")


def _agent_with(owner, instructions: str, gateway: RebyteGateway, between_looks: Callable[[float], None]):
    while True:
        agent = current_agent(owner.pk)
        if agent is not None and agent.owner_instructions == instructions:
            return agent
        intent, opened = _open_or_in_flight(owner, instructions)
        if isinstance(intent, SavedAgent):
            return intent
        if opened:
            return realise(intent, gateway, counted=True)
        unsettled = _awaited(intent, between_looks)
        if unsettled is not None:
            # Sent by nobody now: given back unsent (this run sends it), or in flight past any answer its sender
            # could still get (that sender died: it is looked up like any create whose answer was lost).
            return realise(unsettled, gateway)


def _open_or_in_flight(owner, instructions: str) -> tuple[CreationIntent | SavedAgent, bool]:
    """The agent create this run opens (True), or the one in flight it found (False); the agent itself when one
    with `instructions` was adopted meanwhile."""
    with transaction.atomic(durable=True):
        # One run at a time opens the owner's agent create, and it looks for a create in flight before the agent
        # again: one adopted since the read above (its intent no longer in flight) committed with its adoption, so
        # this read of the agent sees it. Otherwise two runs could each miss both and create two agents.
        locks.lock_agent_creation(owner.pk)
        intent = CreationIntent.objects.filter(kind=IntentKind.AGENT, owner=owner, state=IntentState.INTENDED).first()
        if intent is not None:
            return intent, False
        agent = current_agent(owner.pk)
        if agent is not None and agent.owner_instructions == instructions:
            return agent, False
        if agent is not None:
            _retire(agent)
        # The lock makes this run the only opener: the one-intended-agent constraint cannot refuse it. Its first
        # create is counted with its insert (see `_create`): that create is this run's to send.
        intent = CreationIntent.objects.create(
            owner=owner,
            kind=IntentKind.AGENT,
            conversation=None,
            request={"ownerInstructions": instructions},
            attempts=1,
        )
        return intent, True


def _awaited(intent: CreationIntent, between_looks: Callable[[float], None]) -> CreationIntent | None:
    """Waits while another run sends the create of `intent`: None once its sender settled it (adopted, refused or
    left in doubt: the caller reads the agent again); the intent as it stands once nobody is sending it: given back
    unsent (no attempt counted), or still in flight twice the provider's timeout after it was sent (a create's
    answer, then the time to look once for what it made: its sender most likely died). Looking up a create in flight
    would only find nothing yet and park this run until the sweeper's next look."""
    sent_by = intent.updated_at + timedelta(seconds=2 * settings.REBYTE_TIMEOUT_SECONDS)
    while True:
        between_looks(IN_FLIGHT_POLL_SECONDS)
        intent = CreationIntent.objects.filter(id=intent.id, state=IntentState.INTENDED).first()
        if intent is None:
            return None
        if intent.attempts == 0 or timezone.now() >= sent_by:
            return intent


def _retire(agent: SavedAgent) -> None:
    """Under the agent-creation lock: the agent made with earlier instructions is no longer current. The sessions it
    serves rotate at their next turn (`rebyte.sessions`); it is deleted at the provider once no turn uses it."""
    SavedAgent.objects.filter(id=agent.id, gone_at__isnull=True).update(
        gone_at=timezone.now(), gone_reason=AgentGoneReason.INSTRUCTIONS
    )
    logger.info("agent %s of user %s retired: its owner's instructions changed", agent.remote_id, agent.owner_id)
