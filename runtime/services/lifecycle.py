"""Every state change of a locked Run: input sent, output projected, device and approval waits, provider release,
parking for reconciliation and resuming, finishing, cancelling.

Each function takes a run its caller has locked (through `runtime.locks`, or the lease's fenced transaction) and
joins the caller's transaction. Inside a fenced transaction the caller holds a `FencedRun`: it can read the run
and project events, and only these functions change the run (the fenced transaction saves what they changed).
Outside one the caller saves.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.error_codes import ErrorCode, RunError
from runtime import outbound
from runtime.models import (
    Event,
    EventType,
    Message,
    Notification,
    NotificationKind,
    Run,
    RunState,
    StaffRunActionOutcome,
)
from runtime.services import ending
from runtime.services.projection import project_events
from runtime.services.reasoning_kept import kept_reasoning
from tools import approvals as tool_approvals
from tools import selectors as tool_selectors

logger = logging.getLogger(__name__)


class FencedRun:
    """A fenced block's read-only view of its locked run: every attribute reads through, none can be set.

    Blocks outside `runtime.services` (the run driver, tool dispatch) hold this, so only the functions here
    change a run; `append` projects the block's events (a tool's settled call, say) in the same transaction.
    """

    __slots__ = ("_run",)

    def __init__(self, run: Run):
        object.__setattr__(self, "_run", run)

    def __getattr__(self, name):
        return getattr(self._run, name)

    def __setattr__(self, name, value):
        raise AttributeError(f"a fenced block cannot set run.{name}: change the run through runtime.services")

    def append(self, events: list[tuple[str, dict]]) -> None:
        project_events(self._run, events)


def locked_run(run: "Run | FencedRun") -> Run:
    """The model behind a fenced view (or the run itself), for the functions of this package alone."""
    return run._run if isinstance(run, FencedRun) else run


def provider_backoff_seconds(failures: int) -> float:
    """0.5 s, doubling per consecutive provider failure, capped (docs/design.md §1.4)."""
    return min(settings.IMPO_PROVIDER_BACKOFF_CAP_SECONDS, 0.5 * 2 ** max(0, failures - 1))


def mark_input_sent(run: "Run | FencedRun"):
    """Inside the fenced transaction committed before the run's input goes to the provider; returns when it left."""
    run = locked_run(run)
    run.input_sent_at = run.input_sent_at or timezone.now()
    return run.input_sent_at


def note_provider_recovered(run: "Run | FencedRun") -> int:
    """The provider answers again: the next outage backs off from the start, and the reply stops saying it
    reconnects. Returns the failures counted now."""
    run = locked_run(run)
    if run.provider_failures:
        _say_reconnecting(run, False)
    run.provider_failures = 0
    return 0


def _say_reconnecting(run: Run, reconnecting: bool) -> None:
    """`run.reconnecting`: whether the run waits out a provider outage (docs/api.md "The websocket")."""
    project_events(
        run, [(EventType.RUN_RECONNECTING, {"submissionId": str(run.submission_id), "reconnecting": reconnecting})]
    )


def enter_waiting_device(run: "Run | FencedRun") -> None:
    run = locked_run(run)
    if run.state == RunState.RUNNING:
        run.transition_to(RunState.WAITING_DEVICE)


def leave_waiting_device(run: "Run | FencedRun") -> None:
    run = locked_run(run)
    if run.state == RunState.WAITING_DEVICE:
        run.transition_to(RunState.RUNNING)


def await_approval(run: "Run | FencedRun") -> None:
    """Parks the run (inside its fenced transaction) while one of its calls waits for its owner's answer.

    No worker holds it meanwhile: the lease goes, and so does the attempt, since waiting for a person is no
    crash. The answer, the deadline (the sweeper) or a cancel puts it back in the queue.
    """
    run = locked_run(run)
    run.transition_to(RunState.WAITING_APPROVAL)
    run.attempts = max(0, run.attempts - 1)
    run.lease_owner = ""
    run.lease_expires_at = None
    notify_owner(run, NotificationKind.APPROVAL)


def notify_owner(run: Run, kind: str) -> None:
    """Writes the run's notification of `kind` into the caller's transaction, the one that records the state it
    tells of (docs/design.md §10): committed with it, or not at all. At most one per run and kind, however often the
    state is reached (a second approval wait, a failure after a retry)."""
    Notification.objects.bulk_create([Notification(run_id=run.id, kind=kind)], ignore_conflicts=True)
    outbound.ring_after_commit(outbound.PUSH_DOORBELL)


def requeue_if_answered(run: Run) -> None:
    """A locked run parked for approval goes back to the queue once none of its calls awaits an answer."""
    if run.state != RunState.WAITING_APPROVAL or tool_selectors.has_pending_approval(run):
        return
    run.transition_to(RunState.QUEUED)
    run.last_woken_at = timezone.now()
    outbound.wake_run(run.id)


def finish_in_transaction(
    run: "Run | FencedRun",
    state: str,
    *,
    error: RunError | None = None,
    reply_text_left: str = "",
    reasoned: bool = True,
) -> None:
    """Ends the run inside its fenced transaction (with whatever else that transaction records); `reply_text_left`:
    the reply's last text, projected with the end (`projection.project_ending_output`), appended to its message;
    `reasoned`: False when the caller knows no reasoning was projected for the run, which then has none to read."""
    finish(locked_run(run), state, now=timezone.now(), error=error, reply_text_left=reply_text_left, reasoned=reasoned)


def await_reconciliation(run: "Run | FencedRun", *, reason: str, needs_staff: bool = False) -> None:
    """Parks the run (inside its fenced transaction) until an ambiguous provider outcome is settled: by the sweeper's
    next looks, or (`needs_staff`: looking cannot settle it) by a person at the reconciliation desk.

    Parked, it no longer holds its conversation: the next queued run is woken now, not when the doubt ends."""
    run = locked_run(run)
    run.transition_to(RunState.PENDING_RECONCILIATION)
    run.lease_owner = ""
    run.lease_expires_at = None
    _record_error(run, RunError(ErrorCode.PENDING_RECONCILIATION, reason, retryable=True))
    _warn_once_committed(run.id, "parked for reconciliation", ErrorCode.PENDING_RECONCILIATION)
    say_parked(run, reason=reason, needs_staff=needs_staff)
    notify_owner(run, NotificationKind.RECONCILIATION)
    _wake_following(run)


def say_parked(run: Run, *, reason: str, needs_staff: bool) -> None:
    """`run.pending_reconciliation`: the run waits on the provider's doubtful answer, and whether a person must now
    settle it (said again, with `needsStaff`, when the reconciler gives the doubt to staff)."""
    payload = {"submissionId": str(run.submission_id), "reason": reason, "needsStaff": needs_staff}
    project_events(run, [(EventType.RUN_PENDING_RECONCILIATION, payload)])


_SESSION_REPLACED = {
    ErrorCode.SESSION_NOT_FOUND: (
        "The provider no longer had this conversation's session: a new session was started, with the last turns "
        "carried over."
    ),
    ErrorCode.AGENT_NOT_FOUND: (
        "The provider no longer had your agent: a new agent was created and a new session was started, with the last "
        "turns carried over."
    ),
}


def start_input_over(run: "Run | FencedRun", *, reason: ErrorCode) -> None:
    """Inside the run's fenced transaction: the provider lost the session its input went to (`session_not_found`), or
    the agent a new session needed (`agent_not_found`), so the run is given back, its input to go again, to a new
    session. Backed off as from any provider failure, so a provider that keeps losing things is not hammered. Its
    history gets one line saying so, however many things were lost (the session, then its agent). A run whose owner
    cancelled it meanwhile ends instead.

    The reply begins again too: the new session answers the input from its start, so the text the lost one had
    streamed is withdrawn (the message keeps only the new answer, never the lost half of it followed by the whole)
    and the line says so (`replyRestarted`), for a client to clear what it showed."""
    run = locked_run(run)
    if run.cancel_requested_at is not None:
        finish(run, RunState.CANCELLED, now=timezone.now())
        return
    run.input_sent_at = None
    reply_id = run.submission.assistant_message_id
    withdrawn = Message.objects.filter(id=reply_id).exclude(text="").update(text="")
    said = Event.objects.filter(submission_id=run.submission_id, type=EventType.RUN_SESSION_REPLACED).exists()
    if withdrawn or not said:
        payload = {
            "submissionId": str(run.submission_id),
            "messageId": str(reply_id),
            "replyRestarted": bool(withdrawn),
            "reason": reason,
            "message": _SESSION_REPLACED[reason],
        }
        project_events(run, [(EventType.RUN_SESSION_REPLACED, payload)])
    requeue_for_provider(run, cause=f"the provider lost what the run used ({reason}): starting over")


def resume_parked_run(run: Run) -> None:
    """A locked run parked for reconciliation goes back to the queue: what it waited for was settled."""
    run.transition_to(RunState.QUEUED)
    _record_error(run, None)
    run.last_woken_at = timezone.now()
    run.save()
    outbound.wake_run(run.id)


def fail_parked_run(run: Run, error: RunError) -> None:
    finish(run, RunState.FAILED, now=timezone.now(), error=error)
    run.save()


_FINAL_EVENT = {
    RunState.COMPLETED: EventType.RUN_COMPLETED,
    RunState.FAILED: EventType.RUN_FAILED,
    RunState.CANCELLED: EventType.RUN_CANCELLED,
}


def _record_error(run: Run, error: RunError | None) -> None:
    """The run's error in its columns (all blank for none), which its Submission's `error` is read from."""
    blank = ("", "", False)
    run.error_code, run.error_message, run.error_retryable = (
        (error.code, error.message, error.retryable) if error else blank
    )


def finish(
    run: Run, state: str, *, now, error: RunError | None = None, reply_text_left: str = "", reasoned: bool = True
) -> None:
    """Moves a locked run to a terminal state with its event, and wakes its conversation's next run."""
    run.transition_to(state)
    run.finished_at = now
    run.lease_owner = ""
    run.lease_expires_at = None
    _record_error(run, error)
    reasoning = kept_reasoning(run) if reasoned else None
    reply_id = run.submission.assistant_message_id
    notify = state != RunState.CANCELLED or not run.cancel_requested_by_owner
    following = ending.write_run_end(
        run, state, now=now, reasoning=reasoning, reply_text_left=reply_text_left, notify=notify
    )
    payload = {"submissionId": str(run.submission_id), "status": state, "messageId": str(reply_id)}
    if error:
        payload["error"] = error.as_payload()
    if reasoning:
        payload["reasoning"] = reasoning
    project_events(run, [(_FINAL_EVENT[state], payload)])
    if notify:
        outbound.ring_after_commit(outbound.PUSH_DOORBELL)
    if state == RunState.FAILED:
        _warn_once_committed(run.id, "failed", run.error_code or "unknown")
    if following is not None:
        outbound.wake_run(following)


def _warn_once_committed(run_id, what: str, code: str) -> None:
    """One WARNING line per run that failed or was parked, once its transaction holds: the run id and the error
    code, which an operator searches for; never the message (provider or user text)."""
    transaction.on_commit(lambda: logger.warning("run %s %s: %s", run_id, what, code))


def _wake_following(run: Run) -> None:
    """The run no longer holds its conversation: the next queued run of it may start."""
    following = ending.queued_after(run.submission.conversation_id, run.id).first()
    if following is not None:
        outbound.wake_run(following)


def cancel(run: Run, *, by_owner: bool) -> str:
    """Records a cancellation on a locked run; returns what became of it (a StaffRunActionOutcome).

    Its pending approvals are denied in the same transaction, under the run's lock taken first, so no answer can
    approve one of them meanwhile. A run whose input never left, or one parked for reconciliation, is cancelled on
    the spot (a parked run's creation intent is still looked at, and a remote turn found later is only recorded); a
    queued one, or one parked on an approval, is woken so a worker relays the cancel to the provider. `by_owner`: the
    owner asked (their cancel, their next message interrupting), so they are not notified of it."""
    if run.is_terminal:
        return StaffRunActionOutcome.ALREADY_FINISHED
    if run.cancel_requested_at is not None:
        return StaffRunActionOutcome.ALREADY_REQUESTED
    now = timezone.now()
    run.cancel_requested_at = now
    run.cancel_requested_by_owner = by_owner
    run.version += 1
    project_events(run, tool_approvals.deny_for_cancel(run))
    if run.state == RunState.PENDING_RECONCILIATION or (run.input_sent_at is None and run.state == RunState.QUEUED):
        finish(run, RunState.CANCELLED, now=now)
    elif run.state == RunState.WAITING_APPROVAL:
        requeue_if_answered(run)
    elif run.state == RunState.QUEUED:
        outbound.wake_run(run.id)  # a worker must relay it to the provider
    run.save()
    return StaffRunActionOutcome.CANCELLED if run.is_terminal else StaffRunActionOutcome.CANCEL_REQUESTED


def requeue_for_provider(run: "Run | FencedRun", *, cause: str) -> float:
    """Gives the run back while the provider is unavailable; returns the backoff before it may be claimed.

    Not counted as an attempt: a provider outage of any length never fails a run whose remote turn may
    still be running. The cause stays on the run, for staff and for the final error if our own code fails.
    """
    run = locked_run(run)
    run.provider_failures += 1
    if run.provider_failures == 1:  # an outage begins for this run: its reply says so until the provider answers
        _say_reconnecting(run, True)
    delay = provider_backoff_seconds(run.provider_failures)
    _requeue(run, cause=cause, not_before=timezone.now() + timedelta(seconds=delay), attempt_counts=False)
    outbound.wake_run(run.id, delay_seconds=delay)
    return delay


def requeue_after_error(run: "Run | FencedRun", *, cause: str) -> None:
    """Gives the run back after an unexpected error of our own; the attempt counts, and the cause is kept."""
    run = locked_run(run)
    _requeue(run, cause=cause, not_before=run.not_before, attempt_counts=True)
    outbound.wake_run(run.id)


def requeue_to_start_afresh(run: "Run | FencedRun", *, cause: str) -> None:
    """Gives the run back before its turn started, to start at once on what changed meanwhile (its owner's agent
    instructions): not counted as an attempt, nothing having failed."""
    run = locked_run(run)
    _requeue(run, cause=cause, not_before=None, attempt_counts=False)
    outbound.wake_run(run.id)


def _requeue(run: Run, *, cause: str, not_before, attempt_counts: bool) -> None:
    run.transition_to(RunState.QUEUED)
    if not attempt_counts:
        run.attempts = max(0, run.attempts - 1)
    run.not_before = not_before
    run.lease_owner = ""
    run.lease_expires_at = None
    run.error_message = cause
    run.last_woken_at = timezone.now()
