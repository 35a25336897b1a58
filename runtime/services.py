"""Write paths of the runtime. Each entry point is one durable transaction.

Every Run state change lives here. Lock order, everywhere: a Run row before its Conversation row (runtime.locks);
the conversation row is locked by the event log's `allocate_sequences`, which every insert goes through, by the
admission statement (which allocates the same way) and by `locks.lock_conversation`.
"""

import hashlib
import json
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from impo import telemetry
from impo.database import prepared_cursor
from impo.errors import Conflict, NotFound, RateLimited, ServiceUnavailable
from runtime import limits, locks, outbound
from runtime.events import append_events, batched
from runtime.models import (
    ACTIVE_RUN_STATES,
    COUNTED_RUN_STATES,
    LEASED_RUN_STATES,
    Conversation,
    ConversationKind,
    Event,
    EventType,
    Message,
    MessagePolicy,
    MessageRole,
    MessageStatus,
    Run,
    RunState,
    StaffRunAction,
    StaffRunActionKind,
    StaffRunActionOutcome,
    Submission,
    Task,
)
from runtime.projection import event_to_wire
from tools import selectors as tool_selectors
from tools import services as tool_services
from tools.models import Device

TASK_TITLE_MAX = 120


@dataclass(frozen=True)
class MessageCommand:
    """A client's message, as validated at the boundary."""

    client_message_id: str
    text: str
    device_id: uuid.UUID | None = None
    client_context: dict = field(default_factory=dict)
    # Overrides the conversation's policy for this message only. It decides how the message is admitted, not
    # what it says, so it is no part of the fingerprint: a replay gets the original receipt whatever it names.
    message_policy: str | None = None

    def fingerprint(self, target: str, **extra) -> str:
        canonical = json.dumps(
            {
                "target": target,
                "text": self.text,
                "deviceId": str(self.device_id) if self.device_id else None,
                "clientContext": self.client_context,
                **extra,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


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
    conversation, _ = Conversation.objects.get_or_create(owner=owner, kind=ConversationKind.MAIN_CHAT)
    return conversation


def submit_main_chat_message(*, owner, command: MessageCommand, active_run_cap: int | None = None) -> Receipt:
    """Admits a Main Chat message; `active_run_cap` refuses it (429) while the owner has that many counted runs."""
    fingerprint = command.fingerprint("main_chat")

    def admit() -> Receipt:
        return _admit(owner, MainChatTarget(owner), command, fingerprint, active_run_cap)

    return _admit_once(owner, command.client_message_id, fingerprint, admit)


def create_task(
    *, owner, command: MessageCommand, title: str | None = None, active_run_cap: int | None = None
) -> Receipt:
    """A new Task; the command's `message_policy` becomes its conversation's (its first message has no rival)."""
    fingerprint = command.fingerprint("new_task", title=title)

    def admit() -> Receipt:
        conversation, task = _new_task_conversation(owner, command, title)
        return _admit(owner, _Conversation(conversation.id, task.id), command, fingerprint, active_run_cap)

    return _admit_once(owner, command.client_message_id, fingerprint, admit)


def open_task(*, owner, command: MessageCommand, title: str | None = None) -> Receipt:
    """Creates a Task with its conversation and first queued run inside the caller's transaction.

    For callers that admit a task as part of a larger atomic change (a scheduled occurrence); the
    caller owns idempotency, e.g. through a unique occurrence row written in the same transaction.
    """
    conversation, task = _new_task_conversation(owner, command, title)
    return _admit(
        owner,
        _Conversation(conversation.id, task.id),
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
        return _admit(owner, _TaskConversation(owner, task_id), command, fingerprint, active_run_cap)

    return _admit_once(owner, command.client_message_id, fingerprint, admit)


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


def _admit_once(owner, client_message_id: str, fingerprint: str, admit) -> Receipt:
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
            replay = _replayed_receipt(owner, client_message_id, fingerprint)
            if replay is None:
                raise
            return replay
        except (RateLimited, NotFound):
            replay = _replayed_receipt(owner, client_message_id, fingerprint)
            if replay is None:
                raise
            return replay
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
        raise Conflict("This clientMessageId was already used for a different message.", code="idempotency_conflict")
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


# --- the admission statement ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MainChatTarget:
    """The owner's Main Chat, found by the admission statement itself (nothing is admitted while it is missing)."""

    owner: object
    task_id = None

    def match(self, params: dict) -> str:
        params["conversation_owner"] = self.owner.pk
        return "c.owner_id = %(conversation_owner)s AND c.kind = 'main_chat'"


@dataclass(frozen=True)
class _TaskConversation:
    owner: object
    task_id: uuid.UUID

    def match(self, params: dict) -> str:
        params["conversation_owner"] = self.owner.pk
        params["conversation_task"] = self.task_id
        return (
            "c.id = (SELECT t.conversation_id FROM runtime_task t"
            " WHERE t.id = %(conversation_task)s AND t.owner_id = %(conversation_owner)s)"
        )


@dataclass(frozen=True)
class _Conversation:
    conversation_id: uuid.UUID
    task_id: uuid.UUID | None

    def match(self, params: dict) -> str:
        params["conversation_id"] = self.conversation_id
        return "c.id = %(conversation_id)s"


@dataclass(frozen=True)
class _Outcome:
    """What the admission statement did: `event_seq` is set when it admitted the message."""

    active_runs: int
    device_ok: bool
    conversation_id: uuid.UUID | None
    policy: str | None
    event_seq: int | None
    event_payload: dict | None
    event_created_at: object


_COUNTED_STATES_SQL = ", ".join(f"'{state}'" for state in COUNTED_RUN_STATES)


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
        target = _Conversation(ensure_main_conversation(owner).id, None)
        receipt, outcome = _admission_statement(
            owner, target, command, fingerprint, active_run_cap, policy_decided=False
        )
        if receipt is not None:
            return receipt
    _raise_refusal(outcome, active_run_cap)
    return _admit_by_policy(
        owner, _Conversation(outcome.conversation_id, target.task_id), command, fingerprint, active_run_cap
    )


def _raise_refusal(outcome: _Outcome, active_run_cap: int | None) -> None:
    if active_run_cap is not None and outcome.active_runs >= active_run_cap:
        raise limits.active_runs_refusal(outcome.active_runs)
    if not outcome.device_ok:
        # Another user's device looks exactly like a missing one.
        raise NotFound("No such device.")


def _admit_by_policy(
    owner, target: "_Conversation", command: MessageCommand, fingerprint: str, active_run_cap: int | None
) -> Receipt:
    """Admission into a conversation whose policy for this message is `interrupt` or `reject`.

    A replay never interrupts nor is rejected: it gets its original receipt. Otherwise the unfinished runs are
    locked, then the conversation; from then on no run of it can start or end until commit, so `reject` answers
    about runs that are really unfinished and `interrupt` requests the cancel of each of them in the transaction
    that admits the new message (which then runs once they have ended: one writer per conversation).
    """
    replay = _replayed_receipt(owner, command.client_message_id, fingerprint)
    if replay is not None:
        return replay
    locked_runs = locks.lock_unfinished_runs(target.conversation_id)
    conversation_policy = locks.lock_conversation(target.conversation_id)
    policy = command.message_policy or conversation_policy
    unfinished = list(
        Run.objects.filter(submission__conversation_id=target.conversation_id, state__in=ACTIVE_RUN_STATES)
        .order_by("submission__user_message__sequence")
        .values_list("id", "submission_id")
    )
    if unfinished and policy == MessagePolicy.REJECT:
        raise Conflict(
            "A reply is still running in this conversation; send the message when it has finished.",
            code="run_in_progress",
            retryable=True,
            details={"activeSubmissionId": str(unfinished[0][1])},
        )
    if unfinished and policy == MessagePolicy.INTERRUPT:
        if {run_id for run_id, _ in unfinished} - {run.id for run in locked_runs}:
            raise _ConversationChanged
        for run in locked_runs:
            _cancel(run)
    receipt, outcome = _admission_statement(owner, target, command, fingerprint, active_run_cap, policy_decided=True)
    if receipt is None:
        _raise_refusal(outcome, active_run_cap)
    return receipt


@dataclass(frozen=True)
class AdmissionStatement:
    """The admission statement and the rows it inserts (unsaved instances, ids assigned here)."""

    sql: str
    params: dict
    user_message: Message
    submission: Submission
    run: Run
    event: Event


def _admission_statement(
    owner, target, command: MessageCommand, fingerprint: str, active_run_cap: int | None, *, policy_decided: bool
) -> tuple[Receipt | None, _Outcome]:
    statement = admission_statement(owner, target, command, fingerprint, active_run_cap, policy_decided=policy_decided)
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, statement.params)
        outcome = _Outcome(*cursor.fetchone())
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


def admission_statement(
    owner, target, command: MessageCommand, fingerprint: str, active_run_cap: int | None, *, policy_decided: bool
) -> AdmissionStatement:
    """One statement that checks the owner's limits, allocates the conversation's sequences under its row lock,
    and inserts both messages, the submission, the queued run and its `submission.accepted` event.

    It admits nothing (and locks nothing) when a limit refuses, the conversation does not exist, or the policy
    for this message is not `queue` and was not already decided under locks (`policy_decided`). A replayed
    clientMessageId violates the submission's unique constraint and fails the statement whole. `bench/admission.py`
    runs this very statement under pgbench.
    """
    now = timezone.now()
    user_message = Message(
        conversation_id=None, sequence=0, role=MessageRole.USER, text=command.text, status=MessageStatus.COMPLETED
    )
    assistant_message = Message(
        conversation_id=None, sequence=0, role=MessageRole.ASSISTANT, status=MessageStatus.PENDING
    )
    submission = Submission(
        owner_id=owner.pk,
        client_message_id=command.client_message_id,
        request_fingerprint=fingerprint,
        user_message_id=user_message.id,
        assistant_message_id=assistant_message.id,
        device_id=command.device_id,
        client_context=command.client_context,
    )
    # The run carries the admission's trace context: every later span of the run, in whatever process, joins it.
    run = Run(submission_id=submission.id, owner_id=owner.pk, last_woken_at=now, traceparent=telemetry.traceparent())
    event = Event(
        submission_id=submission.id, type=EventType.SUBMISSION_ACCEPTED, trace_id=telemetry.current_trace_id()
    )
    params = {
        "owner": owner.pk,
        "cap": active_run_cap,
        "device": command.device_id,
        "policy": command.message_policy,
        "policy_decided": policy_decided,
        "payload_submission": str(submission.id),
        "payload_user_message": str(user_message.id),
        "payload_assistant_message": str(assistant_message.id),
        "payload_text": command.text,
        "payload_status": run.state,
    }
    on_conversation = {"conversation_id": "conversation.id"}
    values_of = _SharedValues(params)
    inserts = [
        _insert_from_conversation(
            "user_message",
            user_message,
            {**on_conversation, "sequence": "conversation.message_sequence - 1"},
            values_of,
            now=now,
        ),
        _insert_from_conversation(
            "assistant_message",
            assistant_message,
            {**on_conversation, "sequence": "conversation.message_sequence"},
            values_of,
            now=now,
        ),
        _insert_from_conversation("submission", submission, on_conversation, values_of, now=now),
        _insert_from_conversation("run", run, {}, values_of, now=now),
        _insert_from_conversation(
            "event",
            event,
            {
                **on_conversation,
                "seq": "conversation.event_seq",
                "payload": "jsonb_build_object("
                "'submissionId', %(payload_submission)s::text,"
                " 'userMessage', jsonb_build_object('id', %(payload_user_message)s::text,"
                " 'sequence', conversation.message_sequence - 1, 'text', %(payload_text)s::text),"
                " 'assistantMessage', jsonb_build_object('id', %(payload_assistant_message)s::text,"
                " 'sequence', conversation.message_sequence),"
                " 'status', %(payload_status)s::text)",
            },
            values_of,
            now=now,
            returning="seq, payload, created_at",
        ),
    ]
    # The UPDATE is the event log's sequence allocation (runtime.events.allocate_sequences) for one event and
    # two messages, made conditional on the gate and on the policy read from the locked row.
    sql = f"""
        WITH gate AS (
            SELECT CASE WHEN %(cap)s::int IS NULL THEN 0 ELSE (
                       SELECT count(*) FROM (
                           SELECT 1 FROM runtime_run r WHERE r.owner_id = %(owner)s
                              AND r.state IN ({_COUNTED_STATES_SQL}) LIMIT %(cap)s::int
                       ) counted
                   ) END AS active_runs,
                   (%(device)s::uuid IS NULL OR EXISTS (
                       SELECT 1 FROM {Device._meta.db_table} d WHERE d.id = %(device)s::uuid AND d.owner_id = %(owner)s
                   )) AS device_ok
        ), target AS (
            SELECT c.id, COALESCE(%(policy)s::text, c.message_policy) AS policy
              FROM runtime_conversation c WHERE {target.match(params)}
        ), conversation AS (
            UPDATE runtime_conversation c
               SET last_event_seq = c.last_event_seq + 1,
                   last_message_sequence = c.last_message_sequence + 2,
                   updated_at = now()
              FROM gate, target
             WHERE c.id = target.id
               AND gate.device_ok
               AND (%(cap)s::int IS NULL OR gate.active_runs < %(cap)s::int)
               AND (%(policy_decided)s OR COALESCE(%(policy)s::text, c.message_policy) = '{MessagePolicy.QUEUE}')
            RETURNING c.id, c.last_event_seq AS event_seq, c.last_message_sequence AS message_sequence
        ), {", ".join(inserts)}
        SELECT gate.active_runs, gate.device_ok, target.id, target.policy, event.seq, event.payload, event.created_at
          FROM gate LEFT JOIN target ON true LEFT JOIN event ON true
    """
    return AdmissionStatement(" ".join(sql.split()), params, user_message, submission, run, event)


_SHAREABLE = (str, int, bool, type(None), uuid.UUID, datetime)


class _SharedValues:
    """The statement's column values as parameters `v0`, `v1`, …, equal values sharing one (see
    `_insert_from_conversation`)."""

    def __init__(self, params: dict):
        self._params = params
        self._count = 0
        self._shared: dict[tuple[type, object], str] = {}

    def key_of(self, value) -> str:
        shareable = isinstance(value, _SHAREABLE)
        if shareable and (type(value), value) in self._shared:
            return self._shared[type(value), value]
        key = f"v{self._count}"
        self._count += 1
        self._params[key] = value
        if shareable:
            self._shared[type(value), value] = key
        return key


def _insert_from_conversation(
    name: str, instance, computed: dict[str, str], values_of: _SharedValues, *, now: datetime, returning: str = "1"
) -> str:
    """`name AS (INSERT … SELECT … FROM conversation)` for an unsaved model instance.

    Every column comes from the instance as the ORM would save it (defaults, JSON; auto timestamps are `now`, one
    clock reading for the whole admission), except `computed` ones, which are SQL over the `conversation` CTE
    (whose row exists only when admission goes on).
    Equal values share one parameter: the statement then has few enough, and short enough text, for psycopg to
    reuse its parsed form from one admission to the next instead of parsing it again.
    """
    columns, values = [], []
    for model_field in instance._meta.concrete_fields:
        if model_field.primary_key and model_field.db_returning:
            continue  # a serial id: the database assigns it
        columns.append(model_field.column)
        if model_field.column in computed:
            values.append(computed[model_field.column])
            continue
        if getattr(model_field, "auto_now", False) or getattr(model_field, "auto_now_add", False):
            setattr(instance, model_field.attname, now)
        value = model_field.get_db_prep_save(getattr(instance, model_field.attname), connection)
        values.append(f"%({values_of.key_of(value)})s")
    return (
        f"{name} AS (INSERT INTO {instance._meta.db_table} ({','.join(columns)})"
        f" SELECT {','.join(values)} FROM conversation RETURNING {returning})"
    )


def _accepted_payload(submission: Submission, run: Run) -> dict:
    """What a client needs to show a queued reply: both messages and the run's state."""
    user_message, assistant_message = submission.user_message, submission.assistant_message
    return {
        "submissionId": str(submission.id),
        "userMessage": {"id": str(user_message.id), "sequence": user_message.sequence, "text": user_message.text},
        "assistantMessage": {"id": str(assistant_message.id), "sequence": assistant_message.sequence},
        "status": run.state,
    }


# --- execution: claims, fenced writes, release -------------------------------------------------------


class LeaseLost(Exception):
    """This worker's lease was taken over (or the run finished elsewhere): it must stop writing."""


@dataclass(frozen=True)
class Lease:
    run_id: uuid.UUID
    generation: int
    worker_id: str
    attempt: int


def _lease_duration() -> timedelta:
    return timedelta(seconds=settings.IMPO_RUN_LEASE_SECONDS)


def provider_backoff_seconds(failures: int) -> float:
    """0.5 s, doubling per consecutive provider failure, capped (DESIGN §1.4)."""
    return min(settings.IMPO_PROVIDER_BACKOFF_CAP_SECONDS, 0.5 * 2 ** max(0, failures - 1))


def _earlier_run_unfinished():
    """One writer per conversation: a run waits while any run admitted before it in its conversation is active."""
    return Exists(
        Run.objects.filter(
            submission__conversation_id=OuterRef("submission__conversation_id"),
            submission__user_message__sequence__lt=OuterRef("submission__user_message__sequence"),
            state__in=ACTIVE_RUN_STATES,
        ).exclude(id=OuterRef("id"))
    )


def claim_run(run_id, worker_id: str) -> Lease | None:
    """Takes the run under a fresh lease, or returns None when it is not this worker's to run now."""
    with transaction.atomic(durable=True):
        return claim(run_id, worker_id)


# The common claim in one statement: a run that may be claimed now (queued and not backing off, or leased under
# an expired lease; not cancelled before its input left; attempts left; no earlier run of its conversation still
# active) is locked, skipping a run another worker holds, and leased. Anything else takes `_claim_or_settle`.
_CLAIM_SQL = """
WITH candidate AS (
    SELECT run.id, submission.conversation_id
    FROM runtime_run run
    JOIN runtime_submission submission ON submission.id = run.submission_id
    JOIN runtime_message message ON message.id = submission.user_message_id
    WHERE run.id = %(run)s
      AND (
        (run.state = %(queued)s::varchar AND (run.not_before IS NULL OR run.not_before <= now()))
        OR (run.state = ANY(%(leased)s::varchar[]) AND (run.lease_expires_at IS NULL OR run.lease_expires_at <= now()))
      )
      AND (run.cancel_requested_at IS NULL OR run.input_sent_at IS NOT NULL)
      AND run.attempts < %(max_attempts)s
      AND NOT EXISTS (
        SELECT 1
        FROM runtime_run earlier
        JOIN runtime_submission earlier_submission ON earlier_submission.id = earlier.submission_id
        JOIN runtime_message earlier_message ON earlier_message.id = earlier_submission.user_message_id
        WHERE earlier_submission.conversation_id = submission.conversation_id
          AND earlier_message.sequence < message.sequence
          AND earlier.state = ANY(%(active)s::varchar[])
          AND earlier.id <> run.id
      )
    FOR NO KEY UPDATE OF run SKIP LOCKED
)
UPDATE runtime_run run
SET state = %(running)s::varchar,
    version = run.version + (run.state <> %(running)s::varchar)::int,
    attempts = run.attempts + 1,
    lease_generation = run.lease_generation + 1,
    lease_owner = %(worker)s::varchar,
    lease_expires_at = now() + %(lease)s,
    not_before = NULL,
    started_at = COALESCE(run.started_at, now()),
    updated_at = now()
FROM candidate
WHERE run.id = candidate.id
RETURNING candidate.conversation_id, run.submission_id, run.attempts, run.lease_generation
"""


def claim(run_id, worker_id: str) -> Lease | None:
    """`claim_run` inside the caller's transaction, for a worker that reads what it needs under the same claim."""
    with prepared_cursor() as cursor:
        cursor.execute(
            _CLAIM_SQL,
            {
                "run": run_id,
                "queued": RunState.QUEUED,
                "running": RunState.RUNNING,
                "leased": list(LEASED_RUN_STATES),
                "active": list(ACTIVE_RUN_STATES),
                "max_attempts": settings.IMPO_RUN_MAX_ATTEMPTS,
                "worker": worker_id,
                "lease": _lease_duration(),
            },
        )
        row = cursor.fetchone()
    if row is None:
        return _claim_or_settle(run_id, worker_id)
    conversation_id, submission_id, attempt, generation = row
    _record_started(conversation_id, submission_id, attempt)
    return Lease(run_id=run_id, generation=generation, worker_id=worker_id, attempt=attempt)


def _record_started(conversation_id, submission_id, attempt: int) -> None:
    append_events(
        conversation_id,
        submission_id,
        [(EventType.RUN_STARTED, {"submissionId": str(submission_id), "attempt": attempt, "status": RunState.RUNNING})],
    )


def _claim_or_settle(run_id, worker_id: str) -> Lease | None:
    """The claim's every case: ends a run cancelled before its input left or out of attempts, and otherwise
    claims what the one-statement claim would have (a run it found locked may have been released since)."""
    run = (
        Run.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("submission__user_message")
        .annotate(earlier_run_unfinished=_earlier_run_unfinished())
        .filter(id=run_id)
        .first()
    )
    if run is None or run.is_terminal:
        return None
    now = timezone.now()
    if run.state == RunState.QUEUED and run.not_before is not None and run.not_before > now:
        return None  # backing off from a provider outage; its delayed wake-up (or the sweeper) comes back
    lease_is_live = run.lease_expires_at is not None and run.lease_expires_at > now
    if run.state not in (RunState.QUEUED, *LEASED_RUN_STATES) or (run.state in LEASED_RUN_STATES and lease_is_live):
        return None
    if run.earlier_run_unfinished:
        return None  # the earlier run's end wakes this one
    if run.cancel_requested_at is not None and run.input_sent_at is None:
        _finish(run, RunState.CANCELLED, now=now)
        run.save()
        return None
    if run.attempts >= settings.IMPO_RUN_MAX_ATTEMPTS:
        cause = run.error_message or "no cause recorded"
        message = f"gave up after {run.attempts} attempts; last: {cause}"
        _finish(run, RunState.FAILED, now=now, error=("max_attempts_exceeded", message, False))
        run.save()
        return None
    if run.state != RunState.RUNNING:
        run.transition_to(RunState.RUNNING)
    run.attempts += 1
    run.lease_generation += 1
    run.lease_owner = worker_id
    run.lease_expires_at = now + _lease_duration()
    run.not_before = None
    run.started_at = run.started_at or now
    run.save()
    _record_started(run.submission.conversation_id, run.submission_id, run.attempts)
    return Lease(run_id=run.id, generation=run.lease_generation, worker_id=worker_id, attempt=run.attempts)


@contextmanager
def fenced(lease: Lease):
    """One durable transaction in which this worker may write, if and only if it still holds the lease.

    The locking read checks the fencing token and keeps a would-be successor out until this transaction ends.
    The run is written at the end only if something in it changed (the heartbeat extends the lease). Events
    appended inside are written together (one sequence allocation, one insert).
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(no_key=True, of=("self",))
            .select_related("submission")
            .filter(id=lease.run_id, lease_generation=lease.generation, state__in=LEASED_RUN_STATES)
            .first()
        )
        if run is None:
            raise LeaseLost(f"run {lease.run_id}: generation {lease.generation} is no longer current")
        before = _field_values(run)
        with batched():
            yield run
        changed = [name for name, value in _field_values(run).items() if value != before[name]]
        if changed:
            run.save(update_fields=[*changed, "updated_at"])


def _field_values(run: Run) -> dict:
    return {field.name: getattr(run, field.attname) for field in Run._meta.concrete_fields if not field.primary_key}


def heartbeat(lease: Lease) -> None:
    """Extends the lease; raises LeaseLost when it was taken over."""
    with fenced(lease) as run:
        run.lease_expires_at = timezone.now() + _lease_duration()


def mark_input_sent(run: Run) -> None:
    """Inside the fenced transaction committed before the run's input goes to the provider."""
    run.input_sent_at = run.input_sent_at or timezone.now()


@dataclass(frozen=True)
class Output:
    """What one read of the provider brought for one part of the reply: new text, and its whole text once done."""

    part_id: str
    delta: str
    completed_text: str | None = None


def project_output(run: Run, outputs: list[Output]) -> None:
    """Appends the new text to the assistant message (one write) and projects each delta and completion as its
    own event, in order; inside the run's fenced transaction."""
    message_id = run.submission.assistant_message_id
    appended = "".join(output.delta for output in outputs)
    if appended:
        Message.objects.filter(id=message_id).update(
            text=Concat(F("text"), Value(appended)), status=MessageStatus.STREAMING, updated_at=timezone.now()
        )
    events = []
    for output in outputs:
        if output.delta:
            events.append(
                (EventType.TEXT_DELTA, {"messageId": str(message_id), "partId": output.part_id, "delta": output.delta})
            )
        if output.completed_text is not None:
            events.append(
                (
                    EventType.MESSAGE_COMPLETED,
                    {"messageId": str(message_id), "partId": output.part_id, "text": output.completed_text},
                )
            )
    append_events(run.submission.conversation_id, run.submission_id, events)


def enter_waiting_device(run: Run) -> None:
    if run.state == RunState.RUNNING:
        run.transition_to(RunState.WAITING_DEVICE)


def leave_waiting_device(run: Run) -> None:
    if run.state == RunState.WAITING_DEVICE:
        run.transition_to(RunState.RUNNING)


def await_approval(run: Run) -> None:
    """Parks the run (inside its fenced transaction) while one of its calls waits for its owner's answer.

    No worker holds it meanwhile: the lease goes, and so does the attempt, since waiting for a person is no
    crash. The answer, the deadline (the sweeper) or a cancel puts it back in the queue.
    """
    run.transition_to(RunState.WAITING_APPROVAL)
    run.attempts = max(0, run.attempts - 1)
    run.lease_owner = ""
    run.lease_expires_at = None


def _requeue_if_answered(run: Run) -> None:
    """A locked run parked for approval goes back to the queue once none of its calls awaits an answer."""
    if run.state != RunState.WAITING_APPROVAL or tool_selectors.has_pending_approval(run):
        return
    run.transition_to(RunState.QUEUED)
    run.last_woken_at = timezone.now()
    outbound.wake_run(run.id)


def answer_tool_approval(*, owner, tool_call_id, answer: tool_services.ApprovalAnswer):
    """The owner's approve / deny / edit of a call, and the run made claimable again, in one transaction.

    Returns the approval and whether this answer replayed the recorded one. The run is locked before its
    calls, as everywhere, so two devices answering at once take turns and one decision is recorded.
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("submission")
            .filter(tool_calls__id=tool_call_id, submission__owner=owner)
            .first()
        )
        if run is None:
            raise NotFound("No such tool call.")
        approval, replay = tool_services.answer_approval(run, tool_call_id, answer, decided_by=owner)
        if not replay:
            _requeue_if_answered(run)
            run.save()
        return approval, replay


def finish_run(lease: Lease, state: str, *, error: tuple[str, str, bool] | None = None) -> None:
    with fenced(lease) as run:
        finish_in_transaction(run, state, error=error)


def finish_in_transaction(run: Run, state: str, *, error: tuple[str, str, bool] | None = None) -> None:
    """Ends the run inside its fenced transaction (with whatever else that transaction records)."""
    _finish(run, state, now=timezone.now(), error=error)


def release_for_provider(lease: Lease, *, cause: str) -> float:
    """Gives the run back while the provider is unavailable; returns the backoff before it may be claimed.

    Not counted as an attempt: a provider outage of any length never fails a run whose remote turn may
    still be running. The cause stays on the run, for staff and for the final error if our own code fails.
    """
    with fenced(lease) as run:
        run.transition_to(RunState.QUEUED)
        run.attempts = max(0, run.attempts - 1)
        run.provider_failures += 1
        delay = provider_backoff_seconds(run.provider_failures)
        now = timezone.now()
        run.not_before = now + timedelta(seconds=delay)
        run.lease_owner = ""
        run.lease_expires_at = None
        run.error_message = cause
        run.last_woken_at = now
        outbound.wake_run(run.id, delay_seconds=delay)
        return delay


def note_provider_recovered(run: Run) -> None:
    run.provider_failures = 0


def release_after_error(lease: Lease, *, cause: str) -> None:
    """Gives the run back after an unexpected error of our own; the attempt counts, and the cause is kept."""
    with fenced(lease) as run:
        run.transition_to(RunState.QUEUED)
        run.lease_owner = ""
        run.lease_expires_at = None
        run.error_message = cause
        run.last_woken_at = timezone.now()
        outbound.wake_run(run.id)


def await_reconciliation(run: Run, *, reason: str) -> None:
    """Parks the run (inside its fenced transaction) until an ambiguous provider outcome is settled."""
    run.transition_to(RunState.PENDING_RECONCILIATION)
    run.lease_owner = ""
    run.lease_expires_at = None
    run.error_code = "pending_reconciliation"
    run.error_message = reason
    run.error_retryable = True
    append_events(
        run.submission.conversation_id,
        run.submission_id,
        [(EventType.RUN_PENDING_RECONCILIATION, {"submissionId": str(run.submission_id), "reason": reason})],
    )


def resume_parked_run(run: Run) -> None:
    """A locked run parked for reconciliation goes back to the queue: what it waited for was settled."""
    run.transition_to(RunState.QUEUED)
    run.error_code, run.error_message, run.error_retryable = "", "", False
    run.last_woken_at = timezone.now()
    run.save()
    outbound.wake_run(run.id)


def fail_parked_run(run: Run, *, code: str, message: str) -> None:
    _finish(run, RunState.FAILED, now=timezone.now(), error=(code, message, False))
    run.save()


_FINAL_EVENT = {
    RunState.COMPLETED: EventType.RUN_COMPLETED,
    RunState.FAILED: EventType.RUN_FAILED,
    RunState.CANCELLED: EventType.RUN_CANCELLED,
}
_FINAL_MESSAGE_STATUS = {
    RunState.COMPLETED: MessageStatus.COMPLETED,
    RunState.FAILED: MessageStatus.FAILED,
    RunState.CANCELLED: MessageStatus.CANCELLED,
}


def _finish(run: Run, state: str, *, now, error: tuple[str, str, bool] | None = None) -> None:
    """Moves a locked run to a terminal state with its event, and wakes its conversation's next run."""
    run.transition_to(state)
    run.finished_at = now
    run.lease_owner = ""
    run.lease_expires_at = None
    run.error_code, run.error_message, run.error_retryable = error or ("", "", False)
    Message.objects.filter(id=run.submission.assistant_message_id).update(
        status=_FINAL_MESSAGE_STATUS[state], updated_at=now
    )
    payload = {
        "submissionId": str(run.submission_id),
        "status": state,
        "messageId": str(run.submission.assistant_message_id),
    }
    if error:
        payload["error"] = {"code": error[0], "message": error[1], "retryable": error[2]}
    append_events(run.submission.conversation_id, run.submission_id, [(_FINAL_EVENT[state], payload)])
    following = (
        Run.objects.filter(submission__conversation_id=run.submission.conversation_id, state=RunState.QUEUED)
        .exclude(id=run.id)
        .order_by("submission__user_message__sequence")
        .values_list("id", flat=True)
        .first()
    )
    if following is not None:
        outbound.wake_run(following)


def request_cancel(*, owner, submission_id) -> None:
    """Records the owner's cancellation; a run whose input never left is cancelled on the spot.

    Idempotent, and a finished run stays as it finished. Once the input was sent, the worker driving
    the run relays the cancel to the provider (a successor does, if that worker died), and the final
    state follows the turn's: `completed` if it finished first.
    """
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("submission")
            .filter(submission_id=submission_id, submission__owner=owner)
            .first()
        )
        if run is None:
            raise NotFound("No such submission.")
        _cancel(run)


def _cancel(run: Run) -> str:
    """Records a cancellation on a locked run; returns what became of it (a StaffRunActionOutcome).

    Its pending approvals are denied in the same transaction, under the run's lock taken first, so no answer can
    approve one of them meanwhile. A run whose input never left is cancelled on the spot; a queued one, or one
    parked on an approval, is woken so a worker relays the cancel to the provider."""
    if run.is_terminal:
        return StaffRunActionOutcome.ALREADY_FINISHED
    if run.cancel_requested_at is not None:
        return StaffRunActionOutcome.ALREADY_REQUESTED
    now = timezone.now()
    run.cancel_requested_at = now
    run.version += 1
    tool_services.deny_for_cancel(run)
    if run.input_sent_at is None and run.state in (RunState.QUEUED, RunState.PENDING_RECONCILIATION):
        _finish(run, RunState.CANCELLED, now=now)
    elif run.state == RunState.WAITING_APPROVAL:
        _requeue_if_answered(run)
    elif run.state == RunState.QUEUED:
        outbound.wake_run(run.id)  # a worker must relay it to the provider
    run.save()
    return StaffRunActionOutcome.CANCELLED if run.is_terminal else StaffRunActionOutcome.CANCEL_REQUESTED


# --- the sweeper ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepReport:
    rewoken: int
    expired_leases: int


SWEEP_BATCH = 200


def sweep_runs() -> SweepReport:
    """Re-wakes queued runs whose wake-up may have been lost and runs whose lease expired."""
    now = timezone.now()
    stale_wake = now - timedelta(seconds=settings.IMPO_REWAKE_AFTER_SECONDS)
    with transaction.atomic(durable=True):
        queued = list(
            Run.objects.select_for_update(skip_locked=True)
            .filter(state=RunState.QUEUED)
            .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
            .filter(
                Q(last_woken_at__isnull=True) | Q(last_woken_at__lt=stale_wake) | Q(last_woken_at__lt=F("not_before"))
            )
            .order_by("created_at")
            .values_list("id", flat=True)[:SWEEP_BATCH]
        )
        # An expired lease gets one prompt wake-up, then one per re-wake interval until claimed.
        not_woken_since_expiry = Q(last_woken_at__lt=F("lease_expires_at")) | Q(last_woken_at__lt=stale_wake)
        expired = list(
            Run.objects.select_for_update(skip_locked=True)
            .filter(state__in=LEASED_RUN_STATES, lease_expires_at__lt=now)
            .filter(Q(last_woken_at__isnull=True) | not_woken_since_expiry)
            .order_by("lease_expires_at")
            .values_list("id", flat=True)[:SWEEP_BATCH]
        )
        Run.objects.filter(id__in=queued + expired).update(last_woken_at=now)
        for run_id in queued + expired:
            outbound.wake_run(run_id)
    return SweepReport(rewoken=len(queued), expired_leases=len(expired))


def expire_tool_approvals() -> int:
    """Denies approvals past their deadline (`approval_timeout`) and requeues their runs; returns how many.

    The sweeper's part, so a deadline holds with no client connected. Runs are locked first (skipping those
    an answer or a cancel holds: the next pass finds them if they still need it).
    """
    denied = 0
    with transaction.atomic(durable=True):
        runs = (
            Run.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("submission")
            .filter(id__in=tool_selectors.runs_with_expired_approvals(timezone.now()))
            .order_by("id")[:SWEEP_BATCH]
        )
        for run in runs:
            denied += tool_services.deny_expired(run)
            _requeue_if_answered(run)
            run.save()
    return denied


# --- staff decisions on runs left pending reconciliation -----------------------------------------


def staff_retry_run(run_id) -> bool:
    """Puts a run parked for reconciliation back in the queue; False when it is not parked."""
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id, state=RunState.PENDING_RECONCILIATION).first()
        if run is None:
            return False
        resume_parked_run(run)
        return True


def staff_fail_run(run_id, *, reason: str) -> bool:
    """Ends a parked run as failed, with the staff member's reason visible to its owner."""
    with transaction.atomic(durable=True):
        run = (
            Run.objects.select_for_update()
            .select_related("submission")
            .filter(id=run_id, state=RunState.PENDING_RECONCILIATION)
            .first()
        )
        if run is None:
            return False
        fail_parked_run(run, code="failed_by_staff", message=reason)
        return True


# --- staff actions on runs, audited ------------------------------------------------------------------
# One transaction per run: a run's lock is taken before its conversation's (the module's lock order), so
# locking several runs in one transaction could deadlock against their workers.


def lock_run_for_staff(run_id) -> Run:
    return (
        Run.objects.select_for_update(of=("self",))
        .select_related("submission__user_message", "submission__assistant_message")
        .get(id=run_id)
    )


def staff_cancel_run(run_id, *, actor, batch: uuid.UUID) -> str:
    """Staff's cancel, the owner's own path (`request_cancel`) without the owner check; audited."""
    with transaction.atomic(durable=True):
        run = lock_run_for_staff(run_id)
        outcome = _cancel(run)
        _audit(run, actor=actor, batch=batch, kind=StaffRunActionKind.CANCEL, outcome=outcome)
        return outcome


def reopen_failed_run(run: Run, *, actor, batch: uuid.UUID) -> str:
    """Staff's retry of a locked run, inside the caller's transaction: the same submission, a new attempt.

    What the failure left is cleared: the error, the counters that bounded the last series of attempts, the
    input-sent mark (the new attempt sends its input again, under a key of its own: `Run.retries`) and the
    reply's text. The acceptance is projected again, so clients show the reply as live once more.
    """
    if run.state != RunState.FAILED:
        return _audit(
            run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.NOT_FAILED
        )
    now = timezone.now()
    run.reopen_for_retry()
    run.error_code, run.error_message, run.error_retryable = "", "", False
    run.attempts = run.provider_failures = 0
    run.not_before = run.cancel_requested_at = run.input_sent_at = run.started_at = run.finished_at = None
    run.last_woken_at = now
    run.save()
    submission = run.submission
    Message.objects.filter(id=submission.assistant_message_id).update(
        text="", status=MessageStatus.PENDING, updated_at=now
    )
    payload = {**_accepted_payload(submission, run), "retry": run.retries}
    append_events(submission.conversation_id, submission.id, [(EventType.SUBMISSION_ACCEPTED, payload)])
    outbound.wake_run(run.id)
    return _audit(
        run, actor=actor, batch=batch, kind=StaffRunActionKind.RETRY, outcome=StaffRunActionOutcome.QUEUED_AGAIN
    )


def _audit(run: Run, *, actor, batch: uuid.UUID, kind: str, outcome: str) -> str:
    StaffRunAction.objects.create(run=run, actor=actor, batch=batch, kind=kind, outcome=outcome)
    return outcome
