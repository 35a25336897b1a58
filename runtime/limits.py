"""Per-user limits at the runtime's doors: admission, SSE streams and websockets (docs/operations.md "Security").

Each user has a budget of their own, so one user's flood is refused at admission and never queues ahead of
another user's messages. Redis being down fails these checks open, logged: the active-run cap is counted in
PostgreSQL and keeps bounding the provider turns a user can start.
"""

import hashlib
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core import limits
from core.errors import RateLimited
from core.outages import Condition
from runtime.models import Submission

logger = logging.getLogger(__name__)

# Redis away: each logged once as it starts and once as it ends, not per request or socket (docs/edge.md).
_unchecked_admissions = Condition(
    logger, started="admission rate not checked, failing open", ended="admission rate checked again"
)
_uncounted_slots = Condition(
    logger,
    started="websocket and stream slots not counted, failing open",
    ended="websocket and stream slots counted again",
)

ADMISSION_WINDOW_SECONDS = 60.0
ADMISSION_LIMIT = "admissions"
ACTIVE_RUNS_RETRY_AFTER_SECONDS = 10
# A stream or socket refreshes its slot well within this; one whose process died frees it after this long.
SLOT_TTL_SECONDS = 60.0
SLOT_RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class AdmissionHit:
    """One admission counted against its owner's rate under its command's name."""

    owner_id: int
    member: str

    def refund_replay_of(self, submission_id) -> None:
        """The command was a replay: when its first admission has left the window, this count was taken again for
        nothing and is given back; a copy of a command admitted within the window keeps the count they share."""
        cutoff = timezone.now() - timedelta(seconds=ADMISSION_WINDOW_SECONDS)
        if Submission.objects.filter(id=submission_id, created_at__lt=cutoff).exists():
            limits.release(ADMISSION_LIMIT, self.owner_id, self.member)


@dataclass
class Admission:
    """A command's admission under its owner's limits: the active-run cap its statement checks, the count its rate
    took, and, once the admission finds it, the submission the command replays."""

    active_run_cap: int | None
    hit: AdmissionHit | None
    replay_of: uuid.UUID | None = None

    def replayed(self, submission_id: uuid.UUID) -> None:
        self.replay_of = submission_id


@contextmanager
def admission(owner, client_message_id: str) -> Iterator[Admission]:
    """The limits around one admitting service call, which takes the `Admission` yielded:

        with limits.admission(user, command.client_message_id) as admission:
            receipt = commands.submit_main_chat_message(owner=user, command=command, admission=admission)

    The rate is counted (RateLimited past it) before the call; a replay's count is settled once it has answered."""
    admitting = Admission(active_run_cap(), _check_admission(owner, client_message_id))
    yield admitting
    if admitting.replay_of is not None and admitting.hit is not None:
        admitting.hit.refund_replay_of(admitting.replay_of)


def _check_admission(owner, client_message_id: str) -> AdmissionHit | None:
    """Counts one admission against `owner`'s rate; raises RateLimited past it.

    A replayed command starts nothing, so it is never counted nor refused here. Each command is counted under
    its `clientMessageId`, so copies of one command arriving together (a client retrying a request whose answer
    it lost) count once, before any of them is admitted; past the rate, a client id already admitted goes on to
    get its receipt; and a replay found by the admission itself, whose count was taken again because its first
    left the window, is refunded (`AdmissionHit.refund_replay_of`). The cap on active runs is checked by the admission
    statement (`active_run_cap`).
    """
    allowed = settings.IMPO_LIMIT_ADMISSIONS_PER_MINUTE
    member = hashlib.sha256(client_message_id.encode()).hexdigest()[:32]
    try:
        outcome = limits.hit(
            ADMISSION_LIMIT, owner.pk, allowed=allowed, window_seconds=ADMISSION_WINDOW_SECONDS, member=member
        )
    except limits.LimitsUnavailable as exc:
        _unchecked_admissions.failed(exc)
        return None
    _unchecked_admissions.succeeded()
    if outcome.retry_after is None:
        return AdmissionHit(owner.pk, member) if outcome.counted else None
    if Submission.objects.filter(owner=owner, client_message_id=client_message_id).exists():
        return None
    raise RateLimited(f"More than {allowed} messages a minute.", retry_after=outcome.retry_after)


def active_run_cap() -> int:
    """How many queued or running runs a user may have before admission refuses more (429).

    Counted inside the admission statement, so commands arriving together may overshoot by the number in flight
    on other conversations (which the rate bounds): the cap limits spend, it is not an invariant of the data.
    """
    return settings.IMPO_LIMIT_ACTIVE_RUNS


def active_runs_refusal(active: int) -> RateLimited:
    return RateLimited(
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
            held = limits.acquire(
                self.kind, self.owner_id, self.holder, allowed=self.allowed, ttl_seconds=SLOT_TTL_SECONDS
            )
        except limits.LimitsUnavailable as exc:
            _uncounted_slots.failed(exc)
            return True
        _uncounted_slots.succeeded()
        return held

    def refresh(self) -> None:
        # Over the limit after a lapse (Redis was down) the holder keeps what it has: limits refuse new opens only.
        self.acquire()

    def release(self) -> None:
        limits.release(self.kind, self.owner_id, self.holder)

    def refusal(self) -> RateLimited:
        return RateLimited(f"More than {self.allowed} open {self.kind}.", retry_after=SLOT_RETRY_AFTER_SECONDS)


def refresh_slots(slots: list[Slot]) -> None:
    """Refreshes a process's slots in one round trip; like `Slot.refresh`, a lapse never closes a holder."""
    try:
        limits.acquire_many(
            [(slot.kind, slot.owner_id, slot.holder, slot.allowed) for slot in slots], ttl_seconds=SLOT_TTL_SECONDS
        )
    except limits.LimitsUnavailable as exc:
        _uncounted_slots.failed(exc)
    else:
        _uncounted_slots.succeeded()


def stream_slot(owner) -> Slot:
    return Slot("streams", owner.pk, settings.IMPO_LIMIT_STREAMS)


def websocket_slot(owner) -> Slot:
    return Slot("websockets", owner.pk, settings.IMPO_LIMIT_WEBSOCKETS)
