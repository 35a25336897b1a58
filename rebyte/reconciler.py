"""The reconciler: creates whose outcome the provider left in doubt, settled by looking as soon as it answers again
(docs/provider.md "How long a doubt waits"). The sweeper makes a pass; staff re-check one intent from the admin."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import telemetry
from rebyte import services
from rebyte.client import RebyteGateway
from rebyte.failures import Unavailable
from rebyte.models import OPEN_INTENT_STATES, CreationIntent, IntentKind, IntentState
from rebyte.services import AgentGone, CreationPending, CreationRefused, InputContent, LookupFailed, realise

logger = logging.getLogger(__name__)


def _intent_run_trace(intent_id, *_) -> str:
    # A session is created for one run: settling it belongs to that run's trace. An agent serves many runs.
    return CreationIntent.objects.filter(id=intent_id).values_list("run__traceparent", flat=True).first() or ""


def reconcile_intent(intent_id, gateway: RebyteGateway) -> CreationIntent:
    """Settles an open intent by looking up (then, if absent, creating) its remote resource. Staff's re-check: a
    session whose input names a message's files is only looked up here (the sweeper's pass creates it)."""
    return _reconcile(intent_id, gateway)[0]


@telemetry.traced(
    "impo.reconcile_intent",
    attributes=lambda intent_id, *_: {"impo.intent.id": intent_id},
    parent=_intent_run_trace,
    outcome=lambda reconciled: {"impo.intent.state": reconciled[0].state},
)
def _reconcile(
    intent_id, gateway: RebyteGateway, input_content: InputContent | None = None
) -> tuple[CreationIntent, bool]:
    """(the intent after one look, whether the provider answered it)."""
    intent = CreationIntent.objects.select_related("run").get(id=intent_id)
    answered = True
    if intent.state in OPEN_INTENT_STATES:
        try:
            realise(intent, gateway, may_create=_still_needed(intent), input_content=input_content)
        except LookupFailed as exc:
            answered = False
            logger.info("intent %s not settled yet: %s", intent.id, exc)
        except (CreationPending, CreationRefused, AgentGone, Unavailable) as exc:
            logger.info("intent %s not settled yet: %s", intent.id, exc)
    intent.refresh_from_db()
    return intent, answered


def _still_needed(intent: CreationIntent) -> bool:
    """Whether settling the intent may create its resource again: not once its run ended (the owner cancelled it),
    nor for an agent in doubt that another has replaced; those are only looked up, for the record."""
    if intent.kind == IntentKind.AGENT:
        return services.current_agent(intent.owner_id) is None
    return intent.run is None or not intent.run.is_terminal


def intents_due_for_a_look() -> Q:
    """Pending intents the reconciler looks at now: not left to staff, and not within the grace period that follows
    their first empty listing."""
    grace_began = timezone.now() - timedelta(seconds=settings.IMPO_REBYTE_LISTING_GRACE_SECONDS)
    return Q(state=IntentState.PENDING_RECONCILIATION, needs_staff=False) & (
        Q(looked_empty_at__isnull=True) | Q(looked_empty_at__lte=grace_began)
    )


def reconcile_open_intents(
    gateway: RebyteGateway, *, input_content: InputContent | None = None, limit: int = 50
) -> int:
    """The reconciler's pass: one look at each intent due for one; returns how many it settled. The first lookup the
    provider does not answer ends the pass: the others would not be answered either, and the next pass looks again.
    A session created again sends its input as the run's driver makes it (`input_content`)."""
    due = CreationIntent.objects.filter(intents_due_for_a_look()).order_by("updated_at")
    settled = 0
    for intent_id in due.values_list("id", flat=True)[:limit]:
        intent, answered = _reconcile(intent_id, gateway, input_content)
        settled += intent.state not in OPEN_INTENT_STATES
        if not answered:
            break
    return settled


def staff_adopt_intent(intent_id, *, remote_id: str, actor, note: str) -> None:
    """A staff member confirmed the remote resource exists (id from the provider's console)."""
    with transaction.atomic(durable=True):
        services.adopt(CreationIntent.objects.get(id=intent_id), remote_id)
        CreationIntent.objects.filter(id=intent_id).update(resolved_by=actor, resolution_note=note)


def staff_fail_intent(intent_id, *, actor, note: str) -> bool:
    updated = CreationIntent.objects.filter(id=intent_id, state__in=OPEN_INTENT_STATES).update(
        state=IntentState.FAILED, resolved_by=actor, resolution_note=note, updated_at=timezone.now()
    )
    return bool(updated)
