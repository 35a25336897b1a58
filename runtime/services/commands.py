"""The owner's commands: messages and tasks (admitted once per clientMessageId, replays answered with the original
receipt, `interrupt` and `reject` decided under locks), cancels and answers to tool approvals.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from attachments import selectors as attachment_selectors
from attachments import services as attachment_services
from attachments.models import Attachment
from core import telemetry
from core.error_codes import ErrorCode
from core.errors import Conflict, NotFound, RateLimited, ServiceUnavailable
from runtime import limits, locks, outbound, selectors
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
from tools import capabilities as tool_capabilities

TASK_TITLE_MAX = 120


@dataclass(frozen=True)
class Receipt:
    submission_id: uuid.UUID
    user_message_id: uuid.UUID
    reply_message_id: uuid.UUID  # the assistant message the submission's run writes
    conversation_id: uuid.UUID
    task_id: uuid.UUID | None
    # True when the command had been admitted before and this is its original receipt.
    replayed: bool = False

    @classmethod
    def of(cls, submission: Submission, conversation: Conversation, *, replayed: bool = False) -> "Receipt":
        """The receipt of `submission`, admitted in `conversation`. Only a Task's conversation has a task: asking a
        Main Chat's would cost a query that finds nothing."""
        task_id = conversation.task.id if conversation.kind == ConversationKind.TASK else None
        ids = (submission.id, submission.user_message_id, submission.assistant_message_id, conversation.id, task_id)
        return cls(*ids, replayed=replayed)


# Messages arriving together under `interrupt` can change a conversation's unfinished runs between the moment
# they are locked and the moment the conversation is; the admission then starts over, this many times at most.
POLICY_ADMISSION_ATTEMPTS = 3


def ensure_main_conversation(owner) -> Conversation:
    return selectors.live_main_chats(owner).first() or _main_chat(owner)[0]


def _main_chat(owner) -> tuple[Conversation, bool]:
    """The owner's live Main Chat, and whether it was created now (an insert the one-live-Main-Chat constraint makes a
    no-op when one lives, waiting on a concurrent first message's; then a read): get_or_create's savepoint took four."""
    made = Conversation(owner=owner, kind=ConversationKind.MAIN_CHAT)
    Conversation.objects.bulk_create([made], ignore_conflicts=True)
    live = selectors.live_main_chats(owner).get()
    return live, live.id == made.id


def submit_main_chat_message(*, owner, command: MessageCommand, admission: limits.Admission | None = None) -> Receipt:
    """Admits a Main Chat message under `admission`'s limits (none without one)."""
    fingerprint = command.fingerprint("main_chat")

    def admit(active_run_cap: int | None) -> Receipt:
        return _admit(_Admitting.of(owner, command, fingerprint, active_run_cap), MainChatTarget(owner))

    return admit_once(owner, command, fingerprint, admit, admission)


def create_task(
    *, owner, command: MessageCommand, title: str | None = None, admission: limits.Admission | None = None
) -> Receipt:
    """A new Task; the command's `message_policy` becomes its conversation's (its first message has no rival)."""
    fingerprint = command.fingerprint("new_task", title=title)

    def admit(active_run_cap: int | None) -> Receipt:
        admitting = _Admitting.of(owner, command, fingerprint, active_run_cap)
        conversation, task = _new_task_conversation(owner, command, title or admitting.files_title())
        return _admit(admitting, ConversationTarget(conversation.id, task.id))

    return admit_once(owner, command, fingerprint, admit, admission)


def open_task(*, owner, command: MessageCommand, title: str | None = None) -> Receipt:
    """Creates a Task with its conversation and first queued run inside the caller's transaction.

    For callers that admit a task as part of a larger atomic change (a scheduled occurrence); the
    caller owns idempotency, e.g. through a unique occurrence row written in the same transaction.
    """
    conversation, task = _new_task_conversation(owner, command, title)
    admitting = _Admitting.of(owner, command, command.fingerprint("new_task", title=title), active_run_cap=None)
    return _admit(admitting, ConversationTarget(conversation.id, task.id))


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
    *, owner, task_id: uuid.UUID, command: MessageCommand, admission: limits.Admission | None = None
) -> Receipt:
    fingerprint = command.fingerprint(f"task:{task_id}")

    def admit(active_run_cap: int | None) -> Receipt:
        return _admit(_Admitting.of(owner, command, fingerprint, active_run_cap), TaskTarget(owner, task_id))

    return admit_once(owner, command, fingerprint, admit, admission)


@dataclass(frozen=True)
class _Admitting:
    """One command being admitted, with what its admission reads once: the files it carries (refused here, before
    anything is admitted; linked under their lock once the conversation is, `_admission_statement`)."""

    owner: object
    command: MessageCommand
    fingerprint: str
    active_run_cap: int | None
    files: list[Attachment]

    @classmethod
    def of(cls, owner, command: MessageCommand, fingerprint: str, active_run_cap: int | None) -> "_Admitting":
        ids = command.attachment_ids
        files = attachment_selectors.files_for_message(owner, ids) if ids else []
        return cls(owner, command, fingerprint, active_run_cap, files)

    def files_title(self) -> str | None:
        """A task's title when its first message has files and no words: its first file's name."""
        return self.files[0].name[:TASK_TITLE_MAX] if self.files else None


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


# What refuses a command that may have been admitted before: its original receipt answers instead (the cap, an
# unknown device, task or reply, the conversation's policy, a reply no longer the last, admissions that kept
# changing the conversation).
_REFUSALS = (RateLimited, NotFound, Conflict, ServiceUnavailable)


def admit_once(
    owner,
    command: MessageCommand,
    fingerprint: str,
    admit: Callable[[int | None], Receipt],
    admission: limits.Admission | None,
) -> Receipt:
    """Runs `admit(active_run_cap)` in one durable transaction; a command admitted before gets its original receipt.

    This is the one place a replay is read. No lookup comes first: a replay's insert violates the unique (owner,
    clientMessageId) constraint, the transaction rolls back whole, and the original receipt is read instead. Two
    concurrent posts of one id end the same way for the one that loses. A refusal met before the insert (even one
    under `interrupt`, whose cancels roll back with it) is answered with the original receipt if there is one.
    """
    try:
        return _in_one_transaction(admit, admission.active_run_cap if admission else None)
    except IntegrityError as exc:
        if _violated_constraint(exc) != CLIENT_MESSAGE_ID_CONSTRAINT:
            raise
        refusal: Exception = exc
    except _REFUSALS as exc:
        refusal = exc
    replay = _replayed_receipt(owner, command.client_message_id, fingerprint)
    if replay is None:
        raise refusal
    if admission is not None:
        admission.replayed(replay.submission_id)
    return replay


def _in_one_transaction(admit: Callable[[int | None], Receipt], active_run_cap: int | None) -> Receipt:
    for _ in range(POLICY_ADMISSION_ATTEMPTS):
        try:
            with transaction.atomic(durable=True):
                return admit(active_run_cap)
        except _ConversationChanged:
            continue
    raise ServiceUnavailable("Messages to this conversation arrived together; send this one again.")


CLIENT_MESSAGE_ID_CONSTRAINT = "runtime_submission_client_id"


def _violated_constraint(exc: IntegrityError) -> str | None:
    diagnostics = getattr(exc.__cause__, "diag", None)
    return getattr(diagnostics, "constraint_name", None)


def _replayed_receipt(owner, client_message_id: str, fingerprint: str) -> Receipt | None:
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
    return Receipt.of(submission, submission.conversation, replayed=True)


@telemetry.traced("impo.admission", attributes=lambda admitting, *_, **__: {"impo.owner.id": admitting.owner.pk})
def _admit(admitting: _Admitting, target) -> Receipt:
    """Admits the message inside the caller's transaction, the admission statement run at most twice: once alone,
    which admits a message that queues; once more after what it cannot do alone, create the owner's Main Chat for
    their first message, or decide a policy of `interrupt` or `reject` under locks."""
    receipt, outcome = _admission_statement(admitting, target, policy_decided=False)
    if receipt is not None:
        return receipt
    if outcome.conversation_id is not None:
        _raise_refusal(outcome, admitting.active_run_cap)
        return _admit_by_policy(admitting, ConversationTarget(outcome.conversation_id, target.task_id))
    if not isinstance(target, MainChatTarget):
        raise NotFound("No such task.")
    conversation, created = _main_chat(admitting.owner)
    target = ConversationTarget(conversation.id, None)
    if not created:  # another first message created it meanwhile: its runs are decided about under locks
        return _admit_by_policy(admitting, target)
    # Created in this transaction, the conversation is seen by no other until commit: it has no run to wait for or
    # interrupt, whatever its policy.
    return _admit_decided(admitting, target)


def _raise_refusal(outcome: AdmissionOutcome, active_run_cap: int | None) -> None:
    if active_run_cap is not None and outcome.active_runs >= active_run_cap:
        raise limits.active_runs_refusal(outcome.active_runs)
    if not outcome.device_ok:
        # Another user's device looks exactly like a missing one.
        raise NotFound("No such device.")


def _admit_by_policy(admitting: _Admitting, target: ConversationTarget) -> Receipt:
    """Admission into a conversation whose policy for this message is `interrupt` or `reject`.

    The unfinished runs are locked, then the conversation; from then on no run of it can start or end until commit,
    so `reject` answers about runs that are really unfinished and `interrupt` requests the cancel of each of them in
    the transaction that admits the new message (which then runs once they have ended: one writer per
    conversation). A replay is neither interrupted nor rejected: the caller answers its refusal, or its insert's,
    with the original receipt (`admit_once`).
    """
    locked_runs = locks.lock_unfinished_runs(target.conversation_id)
    conversation_policy = locks.lock_conversation(target.conversation_id)
    policy = admitting.command.message_policy or conversation_policy
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
    return _admit_decided(admitting, target)


def _admit_decided(admitting: _Admitting, target: ConversationTarget) -> Receipt:
    """The admission statement once the policy is decided: only a limit or a deleted conversation refuses it."""
    receipt, outcome = _admission_statement(admitting, target, policy_decided=True)
    if receipt is None:
        _raise_refusal(outcome, admitting.active_run_cap)
        raise NotFound("No such conversation.")  # deleted since its first statement found it
    return receipt


def _admission_statement(
    admitting: _Admitting, target, *, policy_decided: bool
) -> tuple[Receipt | None, AdmissionOutcome]:
    """The statement run once; when it admitted the message (and so holds its conversation's row), the message's
    files are linked under their own lock, which comes after the conversation's (docs/locking.md)."""
    statement = admission_statement(
        admitting.owner,
        target,
        admitting.command,
        admitting.fingerprint,
        admitting.active_run_cap,
        policy_decided=policy_decided,
        file_parts=[attachment_selectors.file_part(attachment) for attachment in admitting.files],
    )
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, statement.params)
        outcome = AdmissionOutcome(*cursor.fetchone())
    if outcome.event_seq is None:
        return None, outcome
    if admitting.files:
        attachment_services.attach_to_message(statement.user_message.id, admitting.files)
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
        reply_message_id=statement.submission.assistant_message_id,
        conversation_id=outcome.conversation_id,
        task_id=target.task_id,
    )
    return receipt, outcome


def answer_tool_approval(*, owner, tool_call_id, answer: tool_approvals.ApprovalAnswer, capability=None):
    """The owner's approve / deny / edit of a call, and the run made claimable again, in one transaction.

    Returns the approval and whether this answer replayed the recorded one. The run is locked before its
    calls, as everywhere, so two devices answering at once take turns and one decision is recorded. An answer
    given with a notification's capability (`tools.capabilities`) spends it in the same transaction: the page's
    answer and the notification's are one write path.
    """
    with transaction.atomic(durable=True):
        run = locks.lock_run_for_owner(owner, tool_calls__id=tool_call_id)
        if run is None:
            raise NotFound("No such tool call.")
        if capability is not None:
            tool_capabilities.spend(run, capability)
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
