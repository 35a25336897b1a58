import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core import telemetry
from core.models import choice_constraint
from runtime.feedback_models import Feedback, feedback_constraint
from runtime.notification_models import Notification, NotificationKind
from runtime.staff_models import StaffRunAction, StaffRunActionKind, StaffRunActionOutcome

# Re-exported: the staff audit and the notifications outbox are runtime models like the others.
__all__ = [
    "Feedback",
    "Notification",
    "NotificationKind",
    "StaffRunAction",
    "StaffRunActionKind",
    "StaffRunActionOutcome",
]


class ConversationKind(models.TextChoices):
    MAIN_CHAT = "main_chat"
    TASK = "task"


class MessagePolicy(models.TextChoices):
    """What a new message does while a run of its conversation is unfinished (docs/api.md "Messages during a reply")."""

    QUEUE = "queue"  # runs after the unfinished runs, in message order
    INTERRUPT = "interrupt"  # cancels the unfinished runs through the normal cancel path, then runs
    REJECT = "reject"  # refused with 409 run_in_progress; nothing is admitted


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    kind = models.CharField(max_length=16, choices=ConversationKind.choices)
    title = models.CharField(max_length=120, blank=True)
    # Counters allocated under this row's lock, in the same transaction as the rows that use them,
    # so a rolled-back insert never leaves a hole in either sequence.
    last_event_seq = models.PositiveBigIntegerField(default=0)
    last_message_sequence = models.PositiveIntegerField(default=0)
    # Every event seq removed by compaction (`services.retention`) is at or below this: a reader that meets a hole
    # in the log meets one of those, and a client resuming from below it may be told to reload its snapshot.
    events_compacted_through = models.PositiveBigIntegerField(default=0)
    message_policy = models.CharField(max_length=16, choices=MessagePolicy.choices, default=MessagePolicy.QUEUE)
    # Deleted by its owner (Main Chat cleared): gone for every owner read; its rows go once nothing remote is
    # pending (`purged_at`), this row staying as the tombstone (docs/data-lifecycle.md).
    deleted_at = models.DateTimeField(null=True, blank=True)
    purged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner"],
                condition=Q(kind="main_chat", deleted_at__isnull=True),
                name="runtime_one_live_main_chat_per_owner",
            ),
            choice_constraint("kind", ConversationKind, "runtime_conversation_kind"),
            choice_constraint("message_policy", MessagePolicy, "runtime_conversation_message_policy"),
        ]
        # Conversation search (runtime.search) matches these very expressions.
        indexes = [
            GinIndex(SearchVector("title", config="simple"), name="runtime_conversation_title_fts"),
            # The deletion pass's queue (`runtime.execution.remote_deletes`): conversations deleted and not yet purged.
            models.Index(
                fields=["deleted_at"],
                condition=Q(deleted_at__isnull=False, purged_at__isnull=True),
                name="runtime_conversation_to_purge",
            ),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} {self.id} of {self.owner_id}"


class Task(models.Model):
    """A unit of background work with its own conversation (and, later, its own remote session)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tasks")
    conversation = models.OneToOneField(Conversation, on_delete=models.CASCADE, related_name="task")
    title = models.CharField(max_length=120)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-created_at"], name="runtime_task_owner_recent")]

    def __str__(self):
        return self.title


class MessageRole(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"


class MessageStatus(models.TextChoices):
    PENDING = "pending"
    STREAMING = "streaming"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Message(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    sequence = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    text = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=MessageStatus.choices)
    # A user message edited after it was sent (docs/api.md "Edit") keeps every version as a message of its own;
    # each later version points at the first one, which stays null here.
    first_version = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="later_versions"
    )
    feedback = models.CharField(max_length=4, choices=Feedback.choices, blank=True)  # the owner's rating; "": none
    # A reply's reasoning summary (Markdown) and how long the agent thought before replying, kept when its run ends.
    reasoning = models.TextField(blank=True)
    reasoning_seconds = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["conversation", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "sequence"], name="runtime_message_sequence_unique"),
            models.CheckConstraint(condition=Q(sequence__gte=1), name="runtime_message_sequence_positive"),
            choice_constraint("role", MessageRole, "runtime_message_role"),
            choice_constraint("status", MessageStatus, "runtime_message_status"),
            feedback_constraint(),
        ]
        indexes = [GinIndex(SearchVector("text", config="simple"), name="runtime_message_text_fts")]

    def __str__(self):
        return f"{self.role} #{self.sequence}"


class Submission(models.Model):
    """A client's command, as accepted: immutable once saved. Its execution state lives on Run."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="submissions")
    client_message_id = models.CharField(max_length=256)
    # SHA-256 of the canonical command (target + body): a replay must match it to get the receipt.
    request_fingerprint = models.CharField(max_length=64)
    user_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")  # shared by its attempts
    assistant_message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="+")
    device_id = models.UUIDField(null=True, blank=True)
    client_context = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "client_message_id"], name="runtime_submission_client_id"),
        ]
        indexes = [models.Index(fields=["conversation", "created_at"], name="runtime_submission_conv")]

    def __str__(self):
        return f"submission {self.id}"


class RunState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_DEVICE = "waiting_device"
    # Parked, holding no worker, until every call of it awaiting approval is answered (or denied by its deadline).
    WAITING_APPROVAL = "waiting_approval"
    PENDING_RECONCILIATION = "pending_reconciliation"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})
ACTIVE_RUN_STATES = frozenset(set(RunState) - TERMINAL_RUN_STATES)
# Runs that keep the later runs of their conversation waiting (one writer per conversation), and that a message's
# `reject` / `interrupt` policy answers about. The claim rule, the policy admission and the lock of a
# conversation's unfinished runs all read this one set. A run parked pending reconciliation is active but holds
# nothing (docs/design.md §1.4): the next message goes to a new session, and only its owner's cancel (or staff) ends it.
UNFINISHED_RUN_STATES = frozenset(ACTIVE_RUN_STATES - {RunState.PENDING_RECONCILIATION})
# Runs that hold or wait for a worker and a provider turn (pending_reconciliation waits on staff): the active-run cap.
COUNTED_RUN_STATES = (RunState.QUEUED, RunState.RUNNING, RunState.WAITING_DEVICE, RunState.WAITING_APPROVAL)
# States in which a worker holds the run under a lease.
LEASED_RUN_STATES = (RunState.RUNNING, RunState.WAITING_DEVICE)

# Every legal edge. A lease that expires puts a running run back to queued for the next claim.
_RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.FAILED}),
    RunState.RUNNING: frozenset(
        {RunState.QUEUED, RunState.WAITING_DEVICE, RunState.WAITING_APPROVAL, RunState.PENDING_RECONCILIATION}
        | TERMINAL_RUN_STATES
    ),
    RunState.WAITING_DEVICE: frozenset(
        {RunState.RUNNING, RunState.QUEUED, RunState.PENDING_RECONCILIATION, *TERMINAL_RUN_STATES}
    ),
    # Answered, timed out or cancelled: back to the queue, for a worker to give the agent its result (or
    # relay the cancel to the provider, whose turn is still waiting on the call).
    RunState.WAITING_APPROVAL: frozenset({RunState.QUEUED}),
    RunState.PENDING_RECONCILIATION: frozenset({RunState.QUEUED, *TERMINAL_RUN_STATES}),
    RunState.COMPLETED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}


class IllegalTransition(Exception): ...


class Run(models.Model):
    """The execution of one submission, claimed by one worker at a time under a fenced lease."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="run")
    # The submission's owner, kept here so the per-user active-run cap is counted from a small partial index
    # (the owner's counted runs only) inside the admission statement, not by joining every past submission.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    state = models.CharField(max_length=32, choices=RunState.choices, default=RunState.QUEUED)
    # Bumped on every client-visible change, so clients can tell a stale read from a fresh one.
    version = models.PositiveIntegerField(default=1)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The fencing token: every worker write is conditional on the generation it claimed with.
    lease_generation = models.PositiveBigIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Whether the cancel came from the owner (their cancel, or their next message interrupting): the owner is not
    # notified of what they did themselves, but is of a cancel by staff or by the provider (docs/design.md §10).
    cancel_requested_by_owner = models.BooleanField(default=False)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    error_retryable = models.BooleanField(default=False)
    last_woken_at = models.DateTimeField(null=True, blank=True)
    # When the run's input was handed to the agent provider (committed before it is sent): from then on a
    # cancel must go through the provider, and a successor must look for the turn instead of sending again.
    input_sent_at = models.DateTimeField(null=True, blank=True)
    # A run given back because the provider was unavailable is not claimed before this (capped backoff);
    # such releases are counted apart from attempts, which bound crashes of our own code only.
    not_before = models.DateTimeField(null=True, blank=True)
    provider_failures = models.PositiveIntegerField(default=0)
    # Times staff retried the run after it failed; each retry is a new attempt with input of its own.
    retries = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The W3C trace context of the run's admission ('' when tracing was off): every later span of the run,
    # in whichever process, continues it, so one run is one trace.
    traceparent = models.CharField(max_length=55, blank=True, default="")
    # When the retention pass removed this settled run's `text.delta` events (null: not yet, or retried since).
    events_compacted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            choice_constraint("state", RunState, "runtime_run_state"),
            models.CheckConstraint(
                condition=~Q(state="running") | Q(lease_expires_at__isnull=False),
                name="runtime_running_run_has_lease",
            ),
            # Parked for approval means no worker: nothing may hold, renew or expire a lease on it.
            models.CheckConstraint(
                condition=~Q(state="waiting_approval") | Q(lease_expires_at__isnull=True, lease_owner=""),
                name="runtime_waiting_approval_run_has_no_lease",
            ),
        ]
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="runtime_run_claimable"),
            models.Index(fields=["owner"], condition=Q(state__in=COUNTED_RUN_STATES), name="runtime_run_owner_counted"),
            # `/metrics` reads the claim latency of the runs first claimed in a recent window.
            models.Index(fields=["started_at"], name="runtime_run_started"),
            # The retention pass's queue: settled runs whose deltas are still logged, oldest first.
            models.Index(
                fields=["finished_at"],
                condition=Q(state__in=sorted(TERMINAL_RUN_STATES), events_compacted_at__isnull=True),
                name="runtime_run_to_compact",
            ),
        ]

    def __str__(self):
        return f"run {self.id} ({self.state})"

    @property
    def trace_id(self) -> str:
        return telemetry.trace_id_of(self.traceparent)

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_RUN_STATES

    def transition_to(self, new_state: str) -> None:
        """The single gate for state changes; the caller saves."""
        if new_state not in _RUN_TRANSITIONS[self.state]:
            raise IllegalTransition(f"run {self.id}: {self.state} -> {new_state}")
        self.state = new_state
        self.version += 1

    def reopen_for_retry(self) -> None:
        """The one way out of a terminal state, by staff or the owner: a failed run queued again for a new attempt.

        Kept out of the transition table, which the execution path follows, so no worker can take this edge.
        """
        if self.state != RunState.FAILED:
            raise IllegalTransition(f"run {self.id}: only a failed run is retried, not a {self.state} one")
        self.state = RunState.QUEUED
        self.version += 1
        self.retries += 1
        self.events_compacted_at = None  # the new attempt's deltas are compacted once it settles in turn


class EventType(models.TextChoices):
    SUBMISSION_ACCEPTED = "submission.accepted"
    RUN_STARTED = "run.started"
    TEXT_DELTA = "text.delta"
    MESSAGE_COMPLETED = "message.completed"
    TOOL_REQUESTED = "tool.requested"
    TOOL_ACCEPTED = "tool.accepted"
    TOOL_COMPLETED = "tool.completed"
    TOOL_UNCERTAIN = "tool.uncertain"
    TOOL_APPROVAL_REQUESTED = "tool.approval_requested"
    TOOL_APPROVAL_DECIDED = "tool.approval_decided"
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"
    RUN_PENDING_RECONCILIATION = "run.pending_reconciliation"
    RUN_RECONNECTING = "run.reconnecting"  # the provider stopped answering the run (or answers again): for its words
    # The provider had lost the run's session (or agent): the run went on in a new one, with the carry.
    RUN_SESSION_REPLACED = "run.session_replaced"
    RUN_PROGRESS = "run.progress"  # what the agent is doing (its reasoning): transient, never the reply's text


# The events a run's end is told by, one per run (`runtime.services.lifecycle.finish`).
RUN_END_EVENTS = frozenset({EventType.RUN_COMPLETED, EventType.RUN_FAILED, EventType.RUN_CANCELLED})


class Event(models.Model):
    """The projection log: what a client sees, in `seq` order per conversation, with no gaps."""

    # No index of their own: each foreign key leads a composite one ((conversation, seq) unique, (submission, seq)),
    # which serves every lookup by it, the cascades' included (docs/data-lifecycle.md).
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=40, choices=EventType.choices)
    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, null=True, blank=True, related_name="events", db_index=False
    )
    payload = models.JSONField(default=dict)
    # The trace of the run the event belongs to ('' when tracing was off), to find its spans from the log.
    trace_id = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="runtime_event_seq_unique"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="runtime_event_seq_positive"),
            choice_constraint("type", EventType, "runtime_event_type"),
        ]
        indexes = [models.Index(fields=["submission", "seq"], name="runtime_event_submission")]

    def __str__(self):
        return f"{self.type} #{self.seq}"


class AccountDeletion(models.Model):
    """An owner's deletion of their account, acknowledged: the queue row of its remote part (every conversation's
    deletion, then the agents'), until the account's last step deletes the user and this row with it."""

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    requested_at = models.DateTimeField(default=timezone.now)
    # Nothing of the account is left at the provider: the last step (`accounts.deletion_driver`) may delete the user.
    remote_done_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"deletion of account {self.owner_id}"
