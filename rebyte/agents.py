"""The owner's agent (docs/provider.md): the one current agent each owner's turns go to, created at most once under
a creation intent (`rebyte.services`), and created again when the owner's instructions change, since an agent keeps
its instructions for life (`rebyte.owner_instructions`).
"""

import logging

from django.db import transaction
from django.utils import timezone

from rebyte import locks
from rebyte.client import RebyteGateway
from rebyte.failures import Unavailable
from rebyte.models import AgentGoneReason, CreationIntent, IntentKind, IntentState, SavedAgent
from rebyte.services import current_agent, realise

logger = logging.getLogger(__name__)


def ensure_saved_agent(owner, gateway: RebyteGateway, *, instructions: str) -> SavedAgent:
    """The owner's current agent, created with the owner's `instructions` if there is none: one created with others is
    retired first (an agent keeps its instructions for life). An agent create in doubt is not waited for: another is
    created deliberately, and the doubtful one, if found later, is recorded and left unused."""
    for _ in range(2):
        agent = _agent_with(owner, instructions, gateway)
        if agent.owner_instructions == instructions:
            return agent
        # A create already in flight with the instructions before: its agent, retired at the next look.
    raise Unavailable(f"the instructions of user {owner.pk} changed while their agent was created", operation="create")


def _agent_with(owner, instructions: str, gateway: RebyteGateway) -> SavedAgent:
    agent = current_agent(owner.pk)
    if agent is not None and agent.owner_instructions == instructions:
        return agent
    with transaction.atomic(durable=True):
        # One run at a time opens the owner's agent create, and it looks for a create in flight before the agent
        # again: one adopted since the read above (its intent no longer in flight) committed with its adoption, so
        # this read of the agent sees it. Otherwise two runs could each miss both and create two agents.
        locks.lock_agent_creation(owner.pk)
        intent = CreationIntent.objects.filter(kind=IntentKind.AGENT, owner=owner, state=IntentState.INTENDED).first()
        opened = intent is None
        if opened:
            agent = current_agent(owner.pk)
            if agent is not None and agent.owner_instructions == instructions:
                return agent
            if agent is not None:
                _retire(agent)
            # The lock makes this run the only opener: the one-intended-agent constraint cannot refuse it. Its
            # first create is counted with its insert (see `_create`): that create is this run's to send.
            intent = CreationIntent.objects.create(
                owner=owner,
                kind=IntentKind.AGENT,
                conversation=None,
                request={"ownerInstructions": instructions},
                attempts=1,
            )
    return realise(intent, gateway, counted=opened)


def _retire(agent: SavedAgent) -> None:
    """Under the agent-creation lock: the agent made with earlier instructions is no longer current. The sessions it
    serves rotate at their next turn (`rebyte.sessions`); it is deleted at the provider once no turn uses it."""
    SavedAgent.objects.filter(id=agent.id, gone_at__isnull=True).update(
        gone_at=timezone.now(), gone_reason=AgentGoneReason.INSTRUCTIONS
    )
    logger.info("agent %s of user %s retired: its owner's instructions changed", agent.remote_id, agent.owner_id)
