"""The admission: the command as validated, the one statement that admits it (limits, the conversation's
sequences, both messages, the submission, the queued run and its `submission.accepted` event), and what it did.

The statement is built from the models' own fields (`_insert_from_conversation`); `bench/admission.py` runs it
as is under pgbench.
"""

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from core import telemetry
from runtime.events import sequence_allocation
from runtime.models import (
    COUNTED_RUN_STATES,
    Event,
    EventType,
    Message,
    MessagePolicy,
    MessageRole,
    MessageStatus,
    Run,
    Submission,
)
from tools.models import Device


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
    # The sender's files the message carries, in the order sent (the client's ids, checked by admission).
    attachment_ids: tuple[uuid.UUID, ...] = ()

    def fingerprint(self, target: str, **extra) -> str:
        # Named only when there are files, so a message without any keeps the fingerprint it was admitted with.
        files = {"attachmentIds": [str(client_id) for client_id in self.attachment_ids]} if self.attachment_ids else {}
        canonical = json.dumps(
            {
                "target": target,
                "text": self.text,
                "deviceId": str(self.device_id) if self.device_id else None,
                "clientContext": self.client_context,
                **files,
                **extra,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class MainChatTarget:
    """The owner's Main Chat, found by the admission statement itself (nothing is admitted while it is missing)."""

    owner: object
    task_id = None

    def match(self, params: dict) -> str:
        params["conversation_owner"] = self.owner.pk
        return "c.owner_id = %(conversation_owner)s AND c.kind = 'main_chat'"


@dataclass(frozen=True)
class TaskTarget:
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
class ConversationTarget:
    conversation_id: uuid.UUID
    task_id: uuid.UUID | None

    def match(self, params: dict) -> str:
        params["conversation_id"] = self.conversation_id
        return "c.id = %(conversation_id)s"


@dataclass(frozen=True)
class AdmissionOutcome:
    """What the admission statement did: `event_seq` is set when it admitted the message."""

    active_runs: int
    device_ok: bool
    conversation_id: uuid.UUID | None
    policy: str | None
    event_seq: int | None
    event_payload: dict | None
    event_created_at: object


_COUNTED_STATES_SQL = ", ".join(f"'{state}'" for state in COUNTED_RUN_STATES)


@dataclass(frozen=True)
class AdmissionStatement:
    """The admission statement and the rows it inserts (unsaved instances, ids assigned here)."""

    sql: str
    params: dict
    user_message: Message
    submission: Submission
    run: Run
    event: Event


# The owner's limits read before anything is admitted: runs still counting against the cap (counted no further than
# the cap) and whether the device named, if any, is the owner's.
_GATE_SQL = f"""
    SELECT CASE WHEN %(cap)s::int IS NULL THEN 0 ELSE (
               SELECT count(*) FROM (
                   SELECT 1 FROM runtime_run r WHERE r.owner_id = %(owner)s
                      AND r.state IN ({_COUNTED_STATES_SQL}) LIMIT %(cap)s::int
               ) counted
           ) END AS active_runs,
           (%(device)s::uuid IS NULL OR EXISTS (
               SELECT 1 FROM {Device._meta.db_table} d WHERE d.id = %(device)s::uuid AND d.owner_id = %(owner)s
           )) AS device_ok
"""
# The sequences are allocated (and the conversation row locked) only when the gate passes and the policy read from
# the locked row (or decided by the caller under locks) queues the message.
# `deleted_at` is checked again here, on the row as locked: a delete committed meanwhile refuses the message.
_ADMITTED_IF = (
    "c.id = target.id AND c.deleted_at IS NULL AND gate.device_ok"
    " AND (%(cap)s::int IS NULL OR gate.active_runs < %(cap)s::int)"
    f" AND (%(policy_decided)s OR COALESCE(%(policy)s::text, c.message_policy) = '{MessagePolicy.QUEUE}')"
)
# `submission.accepted` is built in Python like every other; only the sequences the statement allocates are set here.
_ACCEPTED_PAYLOAD_SQL = (
    "jsonb_set(jsonb_set(%(accepted)s::jsonb,"
    " '{userMessage,sequence}', to_jsonb(conversation.message_sequence - 1)),"
    " '{assistantMessage,sequence}', to_jsonb(conversation.message_sequence))"
)
_ADMISSION_RESULT_SQL = """
    SELECT gate.active_runs, gate.device_ok, target.id, target.policy, event.seq, event.payload, event.created_at
      FROM gate LEFT JOIN target ON true LEFT JOIN event ON true
"""


def admission_statement(
    owner,
    target,
    command: MessageCommand,
    fingerprint: str,
    active_run_cap: int | None,
    *,
    policy_decided: bool,
    file_parts: list[dict] = (),
) -> AdmissionStatement:
    """One statement that checks the owner's limits, allocates the conversation's sequences under its row lock,
    and inserts both messages, the submission, the queued run and its `submission.accepted` event.

    It admits nothing (and locks nothing) when a limit refuses, the conversation does not exist, or the policy
    for this message is not `queue` and was not already decided under locks (`policy_decided`). A replayed
    clientMessageId violates the submission's unique constraint and fails the statement whole. `bench/admission.py`
    runs this very statement under pgbench.
    `file_parts` are the parts of the files the message carries (`attachments.selectors.file_part`), for its
    `submission.accepted`; the files themselves are linked by the caller, in the same transaction.
    """
    now = timezone.now()
    user_message, assistant_message, submission, run, event = _unsaved_rows(owner, command, fingerprint, now)
    params = {
        "owner": owner.pk,
        "cap": active_run_cap,
        "device": command.device_id,
        "policy": command.message_policy,
        "policy_decided": policy_decided,
        "accepted": Jsonb(
            accepted_payload(
                submission_id=submission.id,
                user_message=user_message,
                assistant_message=assistant_message,
                status=run.state,
                file_parts=file_parts,
            )
        ),
    }
    inserts = _inserts(user_message, assistant_message, submission, run, event, _SharedValues(params), now=now)
    allocation = sequence_allocation(_ADMITTED_IF, events="1", messages="2", source="gate, target")
    sql = f"""
        WITH gate AS ({_GATE_SQL}), target AS (
            SELECT c.id, COALESCE(%(policy)s::text, c.message_policy) AS policy
              FROM runtime_conversation c WHERE {target.match(params)} AND c.deleted_at IS NULL
        ), conversation AS ({allocation}), {", ".join(inserts)}
        {_ADMISSION_RESULT_SQL}
    """
    return AdmissionStatement(" ".join(sql.split()), params, user_message, submission, run, event)


def _inserts(
    user_message: Message,
    assistant_message: Message,
    submission: Submission,
    run: Run,
    event: Event,
    values_of: "_SharedValues",
    *,
    now: datetime,
) -> list[str]:
    """The statement's five inserts, each row placed in the conversation the statement allocated for."""
    on_conversation = {"conversation_id": "conversation.id"}
    return [
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
            {**on_conversation, "seq": "conversation.event_seq", "payload": _ACCEPTED_PAYLOAD_SQL},
            values_of,
            now=now,
            returning="seq, payload, created_at",
        ),
    ]


def _unsaved_rows(owner, command: MessageCommand, fingerprint: str, now):
    """The rows one admission inserts, unsaved: the statement sets their conversation and sequences."""
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
    return user_message, assistant_message, submission, run, event


_SHAREABLE = (str, int, bool, type(None), uuid.UUID, datetime)


class _SharedValues:
    """The statement's column values as parameters `v0`, `v1`, …, equal values of one SQL type sharing one (see
    `_insert_from_conversation`): the server binds them, and a parameter has one type."""

    def __init__(self, params: dict):
        self._params = params
        self._count = 0
        self._shared: dict[tuple[type, object, str], str] = {}

    def key_of(self, value, sql_type: str) -> str:
        shareable = isinstance(value, _SHAREABLE)
        if shareable and (type(value), value, sql_type) in self._shared:
            return self._shared[type(value), value, sql_type]
        key = f"v{self._count}"
        self._count += 1
        self._params[key] = value
        if shareable:
            self._shared[type(value), value, sql_type] = key
        return key


def _insert_from_conversation(
    name: str, instance, computed: dict[str, str], values_of: _SharedValues, *, now: datetime, returning: str = "1"
) -> str:
    """`name AS (INSERT … SELECT … FROM conversation)` for an unsaved model instance.

    Every column comes from the instance as the ORM would save it (defaults, JSON; auto timestamps are `now`, one
    clock reading for the whole admission), except `computed` ones, which are SQL over the `conversation` CTE
    (whose row exists only when admission goes on).
    Equal values of one type share one parameter: the statement then has few enough for the server to keep its
    plan from one admission to the next.
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
        # Typed as its column, without a length: an explicit cast to varchar(n) would cut a longer text instead of
        # refusing it as the column does.
        sql_type = re.sub(r"\(.*\)", "", model_field.db_type(connection))
        values.append(f"%({values_of.key_of(value, sql_type)})s::{sql_type}")
    return (
        f"{name} AS (INSERT INTO {instance._meta.db_table} ({','.join(columns)})"
        f" SELECT {','.join(values)} FROM conversation RETURNING {returning})"
    )


def accepted_payload(
    *, submission_id, user_message: Message, assistant_message: Message, status: str, file_parts: list[dict] = ()
) -> dict:
    """The `submission.accepted` payload, at admission and at a staff retry: what a client needs to show a queued
    reply (both messages, the user's files as their `data-instant-file` parts when there are any, and the run's
    state)."""
    shown = {"id": str(user_message.id), "sequence": user_message.sequence, "text": user_message.text}
    return {
        "submissionId": str(submission_id),
        "userMessage": shown | ({"parts": list(file_parts)} if file_parts else {}),
        "assistantMessage": {"id": str(assistant_message.id), "sequence": assistant_message.sequence},
        "status": status,
    }
