"""The owner's commands: messages and tasks (admitted once per clientMessageId, replays answered with the original
receipt, `interrupt` and `reject` decided under locks), cancels and answers to tool approvals.
"""

import uuid
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from impo.core import telemetry
from impo.core.error_codes import ErrorCode
from impo.core.errors import Conflict, NotFound, RateLimited, ServiceUnavailable
from runtime import limits, locks, outbound
from runtime.models import (
    UNFINISHED_RUN_STATES,
    Conversation,
    ConversationKind,
    Event,
    MessagePolicy,
    Run,
    Submission,
    Task,
)
from runtime.services import lifecycle, projection
from runtime.services.admission import (
    AdmissionOutcome,
    ConversationTarget,
    MainChatTarget,
    MessageCommand,
    TaskTarget,
    admission_statement,
)
from runtime.wire import event_to_wire
from tools import approvals as tool_approvals

TASK_TITLE_MAX = 120


@dataclass(frozen=True)
class Receipt:
    submission_id: uuid.UUID
    user_message_id: uuid.UUID
    conversation_id: uuid.UUID
    task_id: uuid.UUID | None
    # True when the command had been admitted before and this is its original receipt.
    replayed: bool = False


# Messages arriving together under `interrupt` can change a conversation's unfinished runs between the moment
# they are locked and the moment the conversation is; the admission then starts over, this many times at most.
POLICY_ADMISSION_ATTEMPTS = 3


def ensure_main_conversation(owner) -> Conversation:
    # A cleared Main Chat stays as a tombstone: the owner's live one is the one not deleted (a new one after a clear).
    conversation, _ = Conversation.objects.get_or_create(owner=owner, kind=ConversationKind.MAIN_CHAT, deleted_at=None)
    return conversation


def submit_main_chat_message(*, owner, command: MessageCommand, active_run_cap: int | None = None) -> Receipt:
    """Admits a Main Chat message; `active_run_cap` refuses it (429) while the owner has that many counted runs."""
    fingerprint = command.fingerprint("main_chat")

    def admit() -> Receipt:
        return _admit(owner, MainChatTarget(owner), command, fingerprint, active_run_cap)

    return admit_once(owner, command.client_message_id, fingerprint, admit)


def create_task(
    *, owner, command: MessageCommand, title: str | None = None, active_run_cap: int | None = None
) -> Receipt:
    """A new Task; the command's `message_policy` becomes its conversation's (its first message has no rival)."""
    fingerprint = command.fingerprint("new_task", title=title)

    def admit() -> Receipt:
        conversation, task = _new_task_conversation(owner, command, title)
        return _admit(owner, ConversationTarget(conversation.id, task.id), command, fingerprint, active_run_cap)

    return admit_once(owner, command.client_message_id, fingerprint, admit)


def open_task(*, owner, command: MessageCommand, title: str | None = None) -> Receipt:
    """Creates a Task with its conversation and first queued run inside the caller's transaction.

    For callers that admit a task as part of a larger atomic change (a scheduled occurrence); the
    caller owns idempotency, e.g. through a unique occurrence row written in the same transaction.
    """
    conversation, task = _new_task_conversation(owner, command, title)
    return _admit(
        owner,
        ConversationTarget(conversation.id, task.id),
        command,
        command.fingerprint("new_task", title=title),
        active_run_cap=None,
    )


def _new_task_conversation(owner, command: MessageCommand, title: str | None) -> tuple[Conversation, Task]:
    task_title = title or default_task_title(command.text)
    conversation = Conversation.objects.create(
        owner=owner,
        kind=ConversationKind.TASK,
        title=task_title,
        message_policy=command.message_policy or MessagePolicy.QUEUE,
    )
    return conversation, Task.objects.create(owner=owner, conversation=conversation, title=task_title)


def submit_task_message(
    *, owner, task_id: uuid.UUID, command: MessageCommand, active_run_cap: int | None = None
) -> Receipt:
    fingerprint = command.fingerprint(f"task:{task_id}")

    def admit() -> Receipt:
        return _admit(owner, TaskTarget(owner, task_id), command, fingerprint, active_run_cap)

    return admit_once(owner, command.client_message_id, fingerprint, admit)


def default_task_title(text: str) -> str:
    first_line = text.strip().splitlines()[0].strip()
    if len(first_line) <= TASK_TITLE_MAX:
        return first_line
    return first_line[: TASK_TITLE_MAX - 1].rstrip() + "…"


def set_message_policy(*, conversation_id: uuid.UUID, policy: str) -> None:
    """Changes what later messages do while a run is unfinished; messages already admitted keep their place."""
    with transaction.atomic(durable=True):
        Conversation.objects.filter(id=conversation_id).update(message_policy=policy, updated_at=timezone.now())


class _ConversationChanged(Exception):
    """A run became unfinished after the unfinished runs were locked: the admission must start over."""


def admit_once(owner, client_message_id: str, fingerprint: str, admit) -> Receipt:
    """Runs `admit` in one durable transaction; the unique (owner, clientMessageId) constraint decides replays.

    No lookup comes first: a replay's insert violates the constraint, the transaction rolls back whole, and the
    original receipt is read instead. Two concurrent posts of one id end the same way for the one that loses.
    A refusal (active-run cap, unknown device or task) is answered with the original receipt if there is one.
    """
    for _ in range(POLICY_ADMISSION_ATTEMPTS):
        try:
            with transaction.atomic(durable=True):
                return admit()
        except _ConversationChanged:
            continue
        except IntegrityError as exc:
            if _violated_constraint(exc) != CLIENT_MESSAGE_ID_CONSTRAINT:
                raise
            replay = replayed_receipt(owner, client_message_id, fingerprint)
            if replay is None:
                raise
            return replay
        except (RateLimited, NotFound):
            replay = replayed_receipt(owner, client_message_id, fingerprint)
            if replay is None:
                raise
            return replay
    raise ServiceUnavailable("Messages to this conversation arrived together; send this one again.")


CLIENT_MESSAGE_ID_CONSTRAINT = "runtime_submission_client_id"


def _violated_constraint(exc: IntegrityError) -> str | None:
    diagnostics = getattr(exc.__cause__, "diag", None)
    return getattr(diagnostics, "constraint_name", None)


def replayed_receipt(owner, client_message_id: str, fingerprint: str) -> Receipt | None:
    submission = (
        Submission.objects.filter(owner=owner, client_message_id=client_message_id)
        .select_related("conversation__task")
        .first()
    )
    if submission is None:
        return None
    if submission.request_fingerprint != fingerprint:
        raise Conflict(
            "This clientMessageId was already used for a different message.", code=ErrorCode.IDEMPOTENCY_CONFLICT
        )
    # Only a task conversation has a task; asking a Main Chat would cost a query that finds nothing.
    conversation = submission.conversation
    task = conversation.task if conversation.kind == ConversationKind.TASK else None
    return Receipt(
        submission_id=submission.id,
        user_message_id=submission.user_message_id,
        conversation_id=submission.conversation_id,
        task_id=task.id if task else None,
        replayed=True,
    )


@telemetry.traced("impo.admission", attributes=lambda owner, *_, **__: {"impo.owner.id": owner.pk})
def _admit(owner, target, command: MessageCommand, fingerprint: str, active_run_cap: int | None) -> Receipt:
    """Admits the message inside the caller's transaction: the `queue` case in one statement, others under locks."""
    receipt, outcome = _admission_statement(owner, target, command, fingerprint, active_run_cap, policy_decided=False)
    if receipt is not None:
        return receipt
    if outcome.conversation_id is None:
        if not isinstance(target, MainChatTarget):
            raise NotFound("No such task.")
        # The owner's first message: the Main Chat is created in this same transaction.
        target = ConversationTarget(ensure_main_conversation(owner).id, None)
        receipt, outcome = _admission_statement(
            owner, target, command, fingerprint, active_run_cap, policy_decided=False
        )
        if receipt is not None:
            return receipt
    _raise_refusal(outcome, active_run_cap)
    return _admit_by_policy(
        owner, ConversationTarget(outcome.conversation_id, target.task_id), command, fingerprint, active_run_cap
    )


def _raise_refusal(outcome: AdmissionOutcome, active_run_cap: int | None) -> None:
    if active_run_cap is not None and outcome.active_runs >= active_run_cap:
        raise limits.active_runs_refusal(outcome.active_runs)
    if not outcome.device_ok:
        # Another user's device looks exactly like a missing one.
        raise NotFound("No such device.")


def _admit_by_policy(
    owner, target: "ConversationTarget", command: MessageCommand, fingerprint: str, active_run_cap: int | None
) -> Receipt:
    """Admission into a conversation whose policy for this message is `interrupt` or `reject`.

    A replay never interrupts nor is rejected: it gets its original receipt. Otherwise the unfinished runs are
    locked, then the conversation; from then on no run of it can start or end until commit, so `reject` answers
    about runs that are really unfinished and `interrupt` requests the cancel of each of them in the transaction
    that admits the new message (which then runs once they have ended: one writer per conversation).
    """
    replay = replayed_receipt(owner, command.client_message_id, fingerprint)
    if replay is not None:
        return replay
    locked_runs = locks.lock_unfinished_runs(target.conversation_id)
    conversation_policy = locks.lock_conversation(target.conversation_id)
    policy = command.message_policy or conversation_policy
    unfinished = list(
        Run.objects.filter(submission__conversation_id=target.conversation_id, state__in=UNFINISHED_RUN_STATES)
        .order_by("submission__user_message__sequence")
        .values_list("id", "submission_id")
    )
    if unfinished and policy == MessagePolicy.REJECT:
        raise Conflict(
            "A reply is still running in this conversation; send the message when it has finished.",
            code=ErrorCode.RUN_IN_PROGRESS,
            details={"activeSubmissionId": str(unfinished[0][1])},
        )
    if unfinished and policy == MessagePolicy.INTERRUPT:
        if {run_id for run_id, _ in unfinished} - {run.id for run in locked_runs}:
            raise _ConversationChanged
        for run in locked_runs:
            lifecycle.cancel(run, by_owner=True)
    receipt, outcome = _admission_statement(owner, target, command, fingerprint, active_run_cap, policy_decided=True)
    if receipt is None:
        _raise_refusal(outcome, active_run_cap)
        raise NotFound("No such conversation.")  # deleted since its first statement found it
    return receipt


def _admission_statement(
    owner, target, command: MessageCommand, fingerprint: str, active_run_cap: int | None, *, policy_decided: bool
) -> tuple[Receipt | None, AdmissionOutcome]:
    statement = admission_statement(owner, target, command, fingerprint, active_run_cap, policy_decided=policy_decided)
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, statement.params)
        outcome = AdmissionOutcome(*cursor.fetchone())
    if outcome.event_seq is None:
        return None, outcome
    event = statement.event
    event.conversation_id = outcome.conversation_id
    event.seq, event.created_at = outcome.event_seq, outcome.event_created_at
    # Read back as the ORM reads a JSON column (the driver hands jsonb over as text).
    event.payload = Event._meta.get_field("payload").from_db_value(outcome.event_payload, None, connection)
    telemetry.annotate({"impo.run.id": statement.run.id, "impo.submission.id": statement.submission.id})
    # The wake-up goes first so a worker starts as early as possible; the live push is only a hint.
    outbound.wake_run(statement.run.id)
    outbound.publish_events(outcome.conversation_id, [event_to_wire(event)])
    receipt = Receipt(
        submission_id=statement.submission.id,
        user_message_id=statement.user_message.id,
        conversation_id=outcome.conversation_id,
        task_id=target.task_id,
    )
    return receipt, outcome


def answer_tool_approval(*, owner, tool_call_id, answer: tool_approvals.ApprovalAnswer):
    """The owner's approve / deny / edit of a call, and the run made claimable again, in one transaction.

    Returns the approval and whether this answer replayed the recorded one. The run is locked before its
    calls, as everywhere, so two devices answering at once take turns and one decision is recorded.
    """
    with transaction.atomic(durable=True):
        run = locks.lock_run_for_owner(owner, tool_calls__id=tool_call_id)
        if run is None:
            raise NotFound("No such tool call.")
        approval, replay, events = tool_approvals.answer_approval(run, tool_call_id, answer, decided_by=owner)
        projection.project_events(run, events)
        if not replay:
            lifecycle.requeue_if_answered(run)
            run.save()
        return approval, replay


def request_cancel(*, owner, submission_id) -> None:
    """Records the owner's cancellation; a run whose input never left is cancelled on the spot.

    Idempotent, and a finished run stays as it finished. Once the input was sent, the worker driving
    the run relays the cancel to the provider (a successor does, if that worker died), and the final
    state follows the turn's: `completed` if it finished first.
    """
    with transaction.atomic(durable=True):
        run = locks.lock_run_for_owner(owner, submission_id=submission_id)
        if run is None:
            raise NotFound("No such submission.")
        lifecycle.cancel(run, by_owner=True)


def rename_conversation(*, owner, conversation_id: uuid.UUID, title: str) -> None:
    """The owner's title for a chat; a Task's own title follows it, so the task list and the chat agree."""
    with transaction.atomic(durable=True):
        now = timezone.now()
        live = Conversation.objects.filter(id=conversation_id, owner=owner, deleted_at__isnull=True)
        if not live.update(title=title, updated_at=now):
            raise NotFound("No such conversation.")
        Task.objects.filter(conversation_id=conversation_id).update(title=title, updated_at=now)
