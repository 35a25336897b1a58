"""The sweeper's part in reconciliation: pending creation intents are settled with the provider, then the runs
parked waiting for them resume (or fail, when the creation failed).
"""

from django.db import transaction
from django.db.models import Q

from rebyte import bindings
from rebyte import services as rebyte_services
from rebyte.client import RebyteGateway
from rebyte.models import IntentState, RemoteTurn
from runtime import locks
from runtime.models import RunState
from runtime.services import lifecycle, sweeper


def settle_reconciliations(gateway: RebyteGateway) -> tuple[int, int]:
    """Reconciles pending creation intents, then resumes (or fails) the runs that waited for them."""
    settled = rebyte_services.reconcile_open_intents(gateway)
    resumed = 0
    with transaction.atomic(durable=True):
        waiting = locks.lock_free_runs(
            Q(state=RunState.PENDING_RECONCILIATION)
            & Q(remote_turn__pending_intent__state__in=[IntentState.CREATED, IntentState.FAILED]),
            order_by="id",
            limit=sweeper.SWEEP_BATCH,
            related=("submission", "remote_turn__pending_intent"),
        )
        for run in waiting:
            remote_turn: RemoteTurn = run.remote_turn
            intent = remote_turn.pending_intent
            bindings.wait_for_intent(remote_turn, None)
            if intent.state == IntentState.FAILED:
                lifecycle.fail_parked_run(run, code="provider_rejected", message=intent.last_error, retryable=False)
            else:
                lifecycle.resume_parked_run(run)
                resumed += 1
    return settled, resumed
