"""Every row lock scheduling takes: a plan. The owner's user row, which a plan's creation locks
to keep the per-owner cap, is locked by `runtime.locks.lock_owner`. The global order, with every app's rows, is in
docs/locking.md: user, then plan, then what admission locks (runs, then the conversation).

FOR NO KEY UPDATE on the plan row alone: a plan is changed and tombstoned in place, never deleted nor re-keyed, and
an occurrence inserted under the lock references it.
"""

from scheduling.models import Plan


def lock_plan(plan_id, **lookup) -> Plan | None:
    """The plan, waiting for its holder; None when none matches (`owner=` scopes it to one user). `owner` is read
    with it, not locked."""
    plans = Plan.objects.select_for_update(no_key=True, of=("self",)).select_related("owner")
    return plans.filter(id=plan_id, **lookup).first()
