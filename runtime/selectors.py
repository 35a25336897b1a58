"""Read paths of the runtime, shaped for the ICA v1 wire format. Every read is scoped to an owner."""

import uuid

from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from attachments.selectors import file_ids_in_order
from core.errors import NotFound
from runtime import locks, search, subscribers
from runtime.attempts import earlier_attempt, superseded
from runtime.history import messages_to_wire
from runtime.models import (
    ACTIVE_RUN_STATES,
    Conversation,
    ConversationKind,
    Event,
    EventType,
    Message,
    Run,
    RunState,
    Submission,
    Task,
)
from runtime.wire import events_to_wire

RESULT_EVENT_TYPES = (EventType.MESSAGE_COMPLETED, EventType.TOOL_COMPLETED)

_TASK_STATUS_BY_RUN_STATE = {
    RunState.QUEUED: "queued",
    RunState.RUNNING: "in_progress",
    RunState.WAITING_DEVICE: "in_progress",
    RunState.WAITING_APPROVAL: "in_progress",
    RunState.PENDING_RECONCILIATION: "in_progress",
    RunState.COMPLETED: "completed",
    RunState.FAILED: "failed",
    RunState.CANCELLED: "cancelled",
}
TASK_STATUSES = tuple(dict.fromkeys(_TASK_STATUS_BY_RUN_STATE.values()))


def submission_for_owner(owner, submission_id: uuid.UUID) -> Submission:
    submission = (
        Submission.objects.filter(id=submission_id, owner=owner, conversation__deleted_at__isnull=True)
        .select_related("run", "conversation__task")
        .annotate(result_count=Count("events", filter=Q(events__type__in=RESULT_EVENT_TYPES)))
        .first()
    )
    if submission is None:
        raise NotFound("No such submission.")
    return submission


def submission_to_wire(submission: Submission) -> dict:
    run = submission.run
    task = getattr(submission.conversation, "task", None)
    return {
        "submissionId": str(submission.id),
        "messageId": str(submission.assistant_message_id),
        "userMessageId": str(submission.user_message_id),
        "replyMessageId": str(submission.assistant_message_id),
        "conversationId": str(submission.conversation_id),
        "taskId": str(task.id) if task else None,
        "status": run.state,
        "resultCount": submission.result_count,
        "subscriberCount": subscribers.count([submission.id])[str(submission.id)],
        "version": run.version,
        "cancelRequested": run.cancel_requested_at is not None,
        "attempts": run.attempts,
        "error": (
            {"code": run.error_code, "message": run.error_message, "retryable": run.error_retryable}
            if run.error_code
            else None
        ),
        "createdAt": submission.created_at.isoformat(),
        "updatedAt": run.updated_at.isoformat(),
        "traceId": run.trace_id or None,
    }


def conversation_page(conversation: Conversation, *, after_sequence: int, limit: int) -> dict:
    """A page of history plus `lastEventSeq`, consistent with each other.

    A client renders the messages, then subscribes to events after `lastEventSeq`, so no delta may
    be in both (doubled text) or in neither (lost text). Every writer changes messages and then
    bumps the conversation's seq in one transaction; holding a share lock on the conversation row
    while reading keeps any writer from committing halfway through this read.
    """
    with transaction.atomic():
        last_event_seq, events_compacted_through = locks.lock_conversation_to_read(conversation.id)
        messages = list(
            Message.objects.filter(conversation=conversation, sequence__gt=after_sequence).order_by("sequence")[
                : limit + 1
            ]
        )
        active_runs = list(
            Run.objects.filter(submission__conversation=conversation, state__in=ACTIVE_RUN_STATES)
            .select_related("submission")
            .annotate(needs_staff=F("remote_turn__pending_intent__needs_staff"))
            .order_by("created_at")
        )
        has_more = len(messages) > limit
        messages = messages[:limit]
        messages_wire = messages_to_wire(messages)
    return {
        "conversationId": str(conversation.id),
        "messages": messages_wire,
        "activeSubmissions": [
            {
                "submissionId": str(run.submission_id),
                "messageId": str(run.submission.assistant_message_id),
                "status": run.state,
                "reconnecting": run.provider_failures > 0,
                "needsStaff": run.state == RunState.PENDING_RECONCILIATION and bool(run.needs_staff),
            }
            for run in active_runs
        ],
        "hasMore": has_more,
        "nextAfterSequence": messages[-1].sequence if messages else after_sequence,
        "lastEventSeq": last_event_seq,
        "eventsCompactedThrough": events_compacted_through,
        "messagePolicy": conversation.message_policy,
    }


def _latest_run(field: str, conversation: str = "conversation"):
    return Subquery(
        Run.objects.filter(submission__conversation=OuterRef(conversation)).order_by("-created_at").values(field)[:1]
    )


def _tasks_with_latest_run():
    return Task.objects.annotate(
        latest_run_state=_latest_run("state"),
        latest_run_started_at=_latest_run("started_at"),
        latest_run_finished_at=_latest_run("finished_at"),
        latest_run_updated_at=_latest_run("updated_at"),
    )


def _owned_tasks(owner):
    """The owner's tasks; a deleted one is gone for every owner read from its deletion's commit."""
    return _tasks_with_latest_run().filter(owner=owner, conversation__deleted_at__isnull=True)


def tasks_for_owner(owner) -> list[Task]:
    return list(_owned_tasks(owner).order_by("-created_at"))


def task_for_owner(owner, task_id: uuid.UUID) -> Task:
    task = _owned_tasks(owner).filter(id=task_id).select_related("conversation").first()
    if task is None:
        raise NotFound("No such task.")
    return task


def task_statuses(task_ids) -> dict[uuid.UUID, str]:
    """Each task's current status on the wire (its latest run's), as the task list shows it."""
    tasks = _tasks_with_latest_run().filter(id__in=task_ids).values_list("id", "latest_run_state")
    return {task_id: _TASK_STATUS_BY_RUN_STATE[state] for task_id, state in tasks}


def task_to_wire(task: Task) -> dict:
    return {
        "taskId": str(task.id),
        "conversationId": str(task.conversation_id),
        "title": task.title,
        "status": _TASK_STATUS_BY_RUN_STATE[task.latest_run_state],
        "createdAt": task.created_at.isoformat(),
        "updatedAt": max(task.updated_at, task.latest_run_updated_at).isoformat(),
        "lastRunStartedAt": task.latest_run_started_at.isoformat() if task.latest_run_started_at else None,
        "lastRunCompletedAt": task.latest_run_finished_at.isoformat() if task.latest_run_finished_at else None,
    }


def live_main_chats(owner):
    """The owner's live Main Chat (one at most): a cleared one stays as a tombstone, the owner's live one is the one
    not deleted (a new one after a clear)."""
    return Conversation.objects.filter(owner=owner, kind=ConversationKind.MAIN_CHAT, deleted_at=None)


# Conversations are searched word by word, each word also as a prefix ("plan" finds "plants"), in the
# language-neutral `simple` configuration: titles and messages are in whatever language their owner writes.
# The vectors are the expressions the GIN indexes of migration 0010 are built on, so the index serves the match.
MAIN_CHAT_TITLE = "Main Chat"


def _conversations_with_activity(owner):
    latest_message = Message.objects.filter(conversation=OuterRef("pk")).order_by("-sequence")
    return Conversation.objects.filter(owner=owner, deleted_at__isnull=True).annotate(
        last_activity_at=Coalesce(Subquery(latest_message.values("created_at")[:1]), F("created_at")),
        latest_run_state=_latest_run("state", conversation="pk"),
        task_id=F("task__id"),
    )


def conversations_for_owner(owner, *, query: str = "", offset: int = 0, limit: int = 30) -> dict:
    """The owner's Main Chat and Tasks as chats, newest activity (last message) first; `query` keeps those whose
    title or any message matches. Offset-paginated: `nextOffset` is null on the last page."""
    conversations = _conversations_with_activity(owner)
    words = search.search_query(query)
    if query and words is None:
        conversations = conversations.none()  # only punctuation: nothing can match
    elif words is not None:
        matching_message = Message.objects.annotate(vector=search.message_text_vector()).filter(
            conversation=OuterRef("pk"), vector=words
        )
        conversations = conversations.annotate(title_search=search.title_vector()).filter(
            Q(title_search=words) | Q(Exists(matching_message))
        )
    rows = list(conversations.order_by("-last_activity_at", "-created_at", "id")[offset : offset + limit + 1])
    has_more = len(rows) > limit
    return {
        "conversations": [_conversation_to_wire(row) for row in rows[:limit]],
        "nextOffset": offset + limit if has_more else None,
    }


def conversation_for_owner(owner, conversation_id: uuid.UUID) -> dict:
    row = _conversations_with_activity(owner).filter(id=conversation_id).first()
    if row is None:
        raise NotFound("No such conversation.")
    return _conversation_to_wire(row)


def _conversation_to_wire(conversation: Conversation) -> dict:
    is_main = conversation.kind == ConversationKind.MAIN_CHAT
    state = conversation.latest_run_state
    return {
        "conversationId": str(conversation.id),
        "kind": conversation.kind,
        "title": conversation.title or (MAIN_CHAT_TITLE if is_main else ""),
        "taskId": str(conversation.task_id) if conversation.task_id else None,
        "status": _TASK_STATUS_BY_RUN_STATE[state] if state else None,
        "runState": state,
        "createdAt": conversation.created_at.isoformat(),
        "lastActivityAt": conversation.last_activity_at.isoformat(),
    }


EVENT_BATCH_SIZE = 500


def owns_conversation(owner, conversation_id) -> bool:
    return Conversation.objects.filter(id=conversation_id, owner=owner, deleted_at__isnull=True).exists()


def events_after(conversation_id, after_seq: int, limit: int = EVENT_BATCH_SIZE) -> list[dict]:
    events = Event.objects.filter(conversation_id=conversation_id, seq__gt=after_seq).order_by("seq")[:limit]
    return events_to_wire(list(events))


def latest_event_seqs(conversation_ids) -> dict[str, int]:
    """The newest committed `seq` of each conversation, in one query (allocated with its events, so never ahead);
    a deleted conversation is left out, which tells its sockets to close.

    Asked every few seconds for every open socket of a process: one array parameter costs the ORM's
    per-parameter work (an `IN` list) only once, about half the CPU at a thousand conversations.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, last_event_seq FROM runtime_conversation WHERE id = ANY(%s::uuid[]) AND deleted_at IS NULL",
            [[str(conversation_id) for conversation_id in conversation_ids]],
        )
        return {str(conversation_id): last_event_seq for conversation_id, last_event_seq in cursor.fetchall()}


def active_submission_ids_by_conversation(conversation_ids) -> dict[str, set[str]]:
    runs = Run.objects.filter(submission__conversation_id__in=conversation_ids, state__in=ACTIVE_RUN_STATES)
    active: dict[str, set[str]] = {}
    for conversation_id, submission_id in runs.values_list("submission__conversation_id", "submission_id"):
        active.setdefault(str(conversation_id), set()).add(str(submission_id))
    return active


def submission_events_after(submission_id, after_seq: int) -> list[dict]:
    events = Event.objects.filter(submission_id=submission_id, seq__gt=after_seq).order_by("seq")
    return events_to_wire(list(events))


def current_attempt_events(submission_id) -> list[dict]:
    """The submission's events from its latest acceptance on: a run staff retried is rebuilt from its new attempt,
    not from the failure it left (re-projected as `submission.accepted`)."""
    latest_acceptance = (
        Event.objects.filter(submission_id=submission_id, type=EventType.SUBMISSION_ACCEPTED)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return submission_events_after(submission_id, (latest_acceptance or 1) - 1)


def submission_is_live(submission_id) -> bool:
    """Whether the submission's conversation still exists for its owner (not deleted)."""
    return Submission.objects.filter(id=submission_id, conversation__deleted_at__isnull=True).exists()


def run_state_of(submission_id) -> str:
    return Run.objects.values_list("state", flat=True).get(submission_id=submission_id)


def run_to_execute(run_id, **read_with_it) -> Run:
    """A run with everything its driver reads, in one query: submission, conversation, owner, both messages, its
    binding to the provider (`remote_turn`, with its session; absent before its first fenced write made one),
    whether it is a regeneration (`regeneration`), the ids of the files its message carries (`file_ids`), and the
    annotations its caller adds (`read_with_it`: what this app does not know, such as the owner's instructions)."""
    return (
        Run.objects.select_related(
            "submission__conversation__owner",
            "submission__user_message",
            "submission__assistant_message",
            "remote_turn__session__intent",
            "remote_turn__session__conversation",
        )
        .annotate(
            regeneration=earlier_attempt("submission__"),
            file_ids=file_ids_in_order(OuterRef("submission__user_message_id")),
            **read_with_it,
        )
        .get(id=run_id)
    )


def cancel_requested(run_id) -> bool:
    return Run.objects.filter(id=run_id, cancel_requested_at__isnull=False).exists()


CARRY_TURNS = 2
CARRY_TURN_CHARACTERS = 750
CARRY_TOTAL_CHARACTERS = 3000


def carry_of(conversation_id, before_sequence: int) -> str:
    """The last completed turns before a message, for a new session to keep the thread (docs/design.md §3): of a
    regenerated reply, its current (latest) attempt only; of an edited message, its current (latest) version only."""
    submissions = (
        Submission.objects.filter(
            conversation_id=conversation_id,
            user_message__sequence__lt=before_sequence,
            run__state=RunState.COMPLETED,
        )
        .filter(~superseded())
        .select_related("user_message", "assistant_message")
        .order_by("-user_message__sequence")[:CARRY_TURNS]
    )
    turns = []
    for submission in reversed(list(submissions)):
        turn = f"User: {submission.user_message.text}\nAssistant: {submission.assistant_message.text}"
        turns.append(turn if len(turn) <= CARRY_TURN_CHARACTERS else turn[: CARRY_TURN_CHARACTERS - 1] + "…")
    return "\n\n".join(turns)[:CARRY_TOTAL_CHARACTERS]


def run_traceparent(run_id) -> str:
    """The trace context persisted at the run's admission ('' for none, or no such run)."""
    return Run.objects.filter(id=run_id).values_list("traceparent", flat=True).first() or ""
