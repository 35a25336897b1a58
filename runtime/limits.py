"""Per-user limits at the runtime's doors: admission, SSE streams and websockets (README "Security").

Each user has a budget of their own, so one user's flood is refused at admission and never queues ahead of
another user's messages. Redis being down fails these checks open, logged: the active-run cap is counted in
PostgreSQL and keeps bounding the provider turns a user can start.
"""

import logging
import uuid

from django.conf import settings

from impo import limits
from impo.errors import RateLimited
from runtime.models import Run, RunState, Submission

logger = logging.getLogger(__name__)

ADMISSION_WINDOW_SECONDS = 60.0
# Runs that hold or wait for a worker and a provider turn; pending_reconciliation waits on staff, not the user.
COUNTED_RUN_STATES = (RunState.QUEUED, RunState.RUNNING, RunState.WAITING_DEVICE, RunState.WAITING_APPROVAL)
ACTIVE_RUNS_RETRY_AFTER_SECONDS = 10
# A stream or socket refreshes its slot well within this; one whose process died frees it after this long.
SLOT_TTL_SECONDS = 60.0
SLOT_RETRY_AFTER_SECONDS = 5


def check_admission(owner, client_message_id: str) -> None:
    """Raises RateLimited when `owner` may not start another run now. A replayed command starts nothing (the
    service answers it with the original receipt or a conflict), so it is not counted."""
    if Submission.objects.filter(owner=owner, client_message_id=client_message_id).exists():
        return
    allowed = settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE
    try:
        wait = limits.hit("admissions", owner.pk, allowed=allowed, window_seconds=ADMISSION_WINDOW_SECONDS)
    except limits.LimitsUnavailable as exc:
        logger.warning("admission rate not checked, failing open: %s", exc)
        wait = None
    if wait is not None:
        raise RateLimited(f"More than {allowed} messages a minute.", retry_after=wait)
    # Counted before the admission transaction, so commands arriving together may overshoot by the number in
    # flight (which the rate above bounds): the cap limits spend, it is not an invariant of the data.
    active = Run.objects.filter(submission__owner=owner, state__in=COUNTED_RUN_STATES).count()
    if active >= settings.IMPO_LIMIT_ACTIVE_RUNS:
        raise RateLimited(
            f"{active} runs are already queued or running; send more when one has finished.",
            retry_after=ACTIVE_RUNS_RETRY_AFTER_SECONDS,
        )


class Slot:
    """One of a user's concurrently open streams or sockets, held in Redis while it lives (blocking calls)."""

    def __init__(self, kind: str, owner_id: int, allowed: int):
        self.kind = kind
        self.owner_id = owner_id
        self.allowed = allowed
        self.holder = uuid.uuid4().hex

    def acquire(self) -> bool:
        try:
            return limits.acquire(
                self.kind, self.owner_id, self.holder, allowed=self.allowed, ttl_seconds=SLOT_TTL_SECONDS
            )
        except limits.LimitsUnavailable as exc:
            logger.warning("%s slot not counted, failing open: %s", self.kind, exc)
            return True

    def refresh(self) -> None:
        # Over the limit after a lapse (Redis was down) the holder keeps what it has: limits refuse new opens only.
        self.acquire()

    def release(self) -> None:
        limits.release(self.kind, self.owner_id, self.holder)

    def refusal(self) -> RateLimited:
        return RateLimited(f"More than {self.allowed} open {self.kind}.", retry_after=SLOT_RETRY_AFTER_SECONDS)


def stream_slot(owner) -> Slot:
    return Slot("streams", owner.pk, settings.IMPO_LIMIT_STREAMS)


def websocket_slot(owner) -> Slot:
    return Slot("websockets", owner.pk, settings.IMPO_LIMIT_WEBSOCKETS)
