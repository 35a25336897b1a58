"""The sweeper's part in what waits on the provider: once it answers again, the runs backing off from its outage are
woken at once, pending creation intents are looked at, and the runs parked waiting for them resume (or fail, when the
creation failed). While it does not answer, one probe per pass is all the sweeper asks of it.
"""

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from core.error_codes import ErrorCode, RunError
from rebyte import bindings, reconciler
from rebyte.client import RebyteGateway
from rebyte.failures import Unavailable
from rebyte.models import CreationIntent, IntentKind, IntentState, RemoteTurn, SavedAgent
from runtime import locks, outbound
from runtime.execution import run_input
from runtime.models import Event, EventType, Run, RunState
from runtime.services import claims, lifecycle, sweeper

# Whether this sweeper's last probe went unanswered. Only the end of an outage it saw wakes the runs backing off:
# while the provider fails some calls and answers others, each run keeps its own backoff. A new sweeper counts as
# having seen one (waking a run early costs it one more try, not an attempt).
_last_probe_failed = True


def settle_reconciliations(gateway: RebyteGateway) -> tuple[int, int]:
    """Wakes what waited out the provider's outage, reconciles pending creation intents, then resumes (or fails) the
    runs that waited for them; returns (intents settled, runs resumed)."""
    answers = _provider_answers(gateway)
    settled = reconciler.reconcile_open_intents(gateway, input_content=run_input.provider_content) if answers else 0
    _say_when_staff_must_act()
    return settled, _resume_parked_runs()


def _provider_answers(gateway: RebyteGateway) -> bool:
    """Whether the provider answers, asked only when something waits on it; the end of an outage wakes the runs
    backing off from it."""
    global _last_probe_failed
    if not _waiting_on_the_provider():
        return True
    try:
        gateway.probe()
    except Unavailable:
        _last_probe_failed = True
        return False
    if _last_probe_failed:
        _wake_runs_backing_off()
    _last_probe_failed = False
    return True


def _waiting_on_the_provider() -> bool:
    return (
        Run.objects.filter(claims.backing_off()).exists()
        or CreationIntent.objects.filter(reconciler.intents_due_for_a_look()).exists()
    )


def _wake_runs_backing_off() -> None:
    """The provider answers again: a run's backoff, which only guessed when it would, ends now. Its failures stay
    counted, so if the provider fails it again the next backoff is as long as it would have been."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        backing_off = locks.lock_free_runs(claims.backing_off(), order_by="not_before", limit=sweeper.SWEEP_BATCH)
        Run.objects.filter(id__in=[run.id for run in backing_off]).update(not_before=now, last_woken_at=now)
        for run in backing_off:
            outbound.wake_run(run.id)


def _say_when_staff_must_act() -> None:
    """A parked run whose doubt the reconciler gave to staff (looking again cannot settle it) tells its owner once:
    its reply stops saying it reconnects and says a person will check (docs/api.md "The websocket")."""
    told = Event.objects.filter(
        submission_id=OuterRef("submission_id"),
        type=EventType.RUN_PENDING_RECONCILIATION,
        payload__needsStaff=True,
    )
    untold = Q(state=RunState.PENDING_RECONCILIATION, remote_turn__pending_intent__needs_staff=True) & ~Exists(told)
    with transaction.atomic(durable=True):
        for run in locks.lock_free_runs(
            untold, order_by="id", limit=sweeper.SWEEP_BATCH, related=("submission", "remote_turn__pending_intent")
        ):
            lifecycle.say_parked(run, reason=run.remote_turn.pending_intent.last_error, needs_staff=True)


def _resume_parked_runs() -> int:
    # A run parked on its owner's agent create sent nothing yet: it goes on as soon as the owner has an agent,
    # whichever intent made it. Otherwise a run goes on once its intent is created, and fails once it failed.
    with_agent = SavedAgent.objects.filter(gone_at__isnull=True).values("owner_id")
    waits_on_an_agent = Q(remote_turn__pending_intent__kind=IntentKind.AGENT)
    resumable = Q(remote_turn__pending_intent__state__in=[IntentState.CREATED, IntentState.FAILED]) | (
        waits_on_an_agent & Q(remote_turn__pending_intent__owner__in=with_agent)
    )
    resumed = 0
    with transaction.atomic(durable=True):
        waiting = locks.lock_free_runs(
            Q(state=RunState.PENDING_RECONCILIATION) & resumable,
            order_by="id",
            limit=sweeper.SWEEP_BATCH,
            related=("submission", "remote_turn__pending_intent"),
        )
        owners = {run.remote_turn.pending_intent.owner_id for run in waiting}
        owners_with_agent = set(with_agent.filter(owner_id__in=owners).values_list("owner_id", flat=True))
        for run in waiting:
            remote_turn: RemoteTurn = run.remote_turn
            intent = remote_turn.pending_intent
            bindings.wait_for_intent(remote_turn, None)
            superseded = intent.kind == IntentKind.AGENT and intent.owner_id in owners_with_agent
            if intent.state == IntentState.FAILED and not superseded:
                lifecycle.fail_parked_run(run, RunError(ErrorCode.PROVIDER_REJECTED, intent.last_error))
            else:
                lifecycle.resume_parked_run(run)
                resumed += 1
    return resumed
