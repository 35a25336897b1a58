import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual

from core.models import choice_constraint


class IntentKind(models.TextChoices):
    AGENT = "agent"
    SESSION = "session"


class IntentState(models.TextChoices):
    INTENDED = "intended"
    CREATED = "created"
    PENDING_RECONCILIATION = "pending_reconciliation"
    FAILED = "failed"


OPEN_INTENT_STATES = (IntentState.INTENDED, IntentState.PENDING_RECONCILIATION)

# What the account page takes and the database holds (docs/api.md "Custom instructions").
OWNER_INSTRUCTIONS_MAX_CHARS = 1500


class CreationIntent(models.Model):
    """A remote create we mean to make, committed before the request goes out.

    Its id is the idempotency key and the metadata the provider is searched by, so after a lost
    response we look up what exists instead of creating a second remote resource.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="creation_intents")
    kind = models.CharField(max_length=16, choices=IntentKind.choices)
    # The conversation a session is for; null for the owner's agent.
    conversation = models.ForeignKey(
        "runtime.Conversation", on_delete=models.CASCADE, null=True, blank=True, related_name="creation_intents"
    )
    # A session is created with its first input, which is this run's: the session's first turn is the run's.
    run = models.ForeignKey("runtime.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # The exact create this intent sends (tools and input), so a retry after a lost answer sends the same.
    request = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=32, choices=IntentState.choices, default=IntentState.INTENDED)
    remote_id = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # When a complete listing found nothing since the latest create: a second one may prove the resource absent only
    # a grace period later, and the reconciler looks again then instead of anyone sleeping through it.
    looked_empty_at = models.DateTimeField(null=True, blank=True)
    # Pending, and looking again cannot settle it (several matches, every create's answer lost): a person decides.
    needs_staff = models.BooleanField(default=False)
    last_error = models.TextField(blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    resolution_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            choice_constraint("kind", IntentKind, "rebyte_intent_kind"),
            choice_constraint("state", IntentState, "rebyte_intent_state"),
            models.CheckConstraint(
                condition=~Q(state="created") | ~Q(remote_id=""), name="rebyte_created_intent_has_remote_id"
            ),
            # One agent create in flight per owner: concurrent runs share it instead of racing. One in doubt
            # (pending reconciliation) does not count: the next run creates another deliberately (docs/design.md §1.4).
            models.UniqueConstraint(
                fields=["owner"], condition=Q(kind="agent", state="intended"), name="rebyte_one_intended_agent_intent"
            ),
            # A session is created with one run's input, so its intent is that run's; while one run's session is
            # in doubt, the conversation's next run creates its own.
            models.UniqueConstraint(
                fields=["run"],
                condition=Q(kind="session", state__in=["intended", "pending_reconciliation"]),
                name="rebyte_one_open_session_intent_per_run",
            ),
        ]

    def __str__(self):
        return f"{self.kind} intent {self.id} ({self.state})"

    @property
    def metadata(self) -> dict[str, str]:
        metadata = {"impo_intent": str(self.id), "impo_owner": str(self.owner_id)}
        if self.conversation_id:
            metadata["impo_conversation"] = str(self.conversation_id)
        return metadata


class OwnerInstructions(models.Model):
    """The owner's standing instructions to their agent, written on the account page (docs/design.md §3): carried to
    the provider as their agent's instructions, from the next turn after each change. No row: none given."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="agent_instructions"
    )
    text = models.TextField(blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("text"), OWNER_INSTRUCTIONS_MAX_CHARS),
                name="rebyte_owner_instructions_bounded",
            )
        ]

    def __str__(self):
        return f"instructions of user {self.owner_id}"


class AgentGoneReason(models.TextChoices):
    # The provider answered 404 for it: nothing can be sent there, nor deleted.
    LOST = "lost"
    # Its owner changed their instructions, which an agent keeps for life: a new agent replaced it, and it is deleted
    # at the provider once no turn uses a session of it.
    INSTRUCTIONS = "instructions"


class SavedAgent(models.Model):
    """The owner's remote Rebyte agent (Main Chat and Tasks share it; each has its own sessions).

    One is current per owner. One the provider lost (404), or one its owner's new instructions replaced, is kept,
    marked gone with the reason, with the sessions it served.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_agents")
    remote_id = models.CharField(max_length=200, unique=True)
    intent = models.OneToOneField(CreationIntent, on_delete=models.PROTECT, related_name="+")
    gone_at = models.DateTimeField(null=True, blank=True)
    gone_reason = models.CharField(max_length=16, choices=AgentGoneReason.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner"], condition=Q(gone_at__isnull=True), name="rebyte_one_current_agent"
            ),
            models.CheckConstraint(
                condition=Q(gone_at__isnull=True, gone_reason="")
                | Q(gone_at__isnull=False, gone_reason__in=AgentGoneReason.values),
                name="rebyte_gone_agent_has_reason",
            ),
        ]

    def __str__(self):
        return self.remote_id

    @property
    def owner_instructions(self) -> str:
        """The owner's instructions it was created with (its intent's request; an agent from before they existed has
        none)."""
        return self.intent.request.get("ownerInstructions", "")


class SessionState(models.TextChoices):
    CURRENT = "current"
    HISTORICAL = "historical"
    # The provider answered 404 for it: nothing more can be sent there or read from it.
    GONE = "gone"


class RemoteSession(models.Model):
    """A remote session bound to a conversation; rotated ones stay as historical bindings, lost ones as gone."""

    conversation = models.ForeignKey("runtime.Conversation", on_delete=models.CASCADE, related_name="remote_sessions")
    saved_agent = models.ForeignKey(SavedAgent, on_delete=models.PROTECT, related_name="sessions")
    remote_id = models.CharField(max_length=200, unique=True)
    intent = models.OneToOneField(CreationIntent, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=16, choices=SessionState.choices, default=SessionState.CURRENT)
    turn_count = models.PositiveIntegerField(default=0)
    # Tokens of instructions, tools and every item (bytes / 3), measured after each completed turn; null
    # until first measured, and a session without an estimate is rotated rather than trusted.
    context_estimate = models.PositiveIntegerField(null=True, blank=True)
    # Tools are fixed for a session's life: a run offered another catalogue needs another session.
    tools_fingerprint = models.CharField(max_length=64, blank=True)
    # The message range this session served, so the whole conversation stays attributable.
    first_message_sequence = models.PositiveIntegerField(null=True, blank=True)
    last_message_sequence = models.PositiveIntegerField(null=True, blank=True)
    rotation_reason = models.CharField(max_length=32, blank=True)
    # When its last turn completed (its creation until then): idleness is measured from here.
    last_activity_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"], condition=Q(state="current"), name="rebyte_one_current_session"
            ),
            choice_constraint("state", SessionState, "rebyte_session_state"),
        ]

    def __str__(self):
        return f"{self.remote_id} ({self.state})"


class RemoteTurn(models.Model):
    """A run's binding to the provider: its session, the turn its input started, and what was projected.

    `baseline_turn_ids` (the session's turns before the input was sent) identify the run's turn as the one
    that is new against them; `projected` counts, per assistant message item, the characters already
    turned into events, so a successor projects only the rest.
    """

    run = models.OneToOneField("runtime.Run", on_delete=models.CASCADE, related_name="remote_turn")
    session = models.ForeignKey(RemoteSession, on_delete=models.PROTECT, null=True, blank=True, related_name="turns")
    baseline_turn_ids = models.JSONField(default=list, blank=True)
    turn_id = models.CharField(max_length=200, blank=True)
    projected = models.JSONField(default=dict, blank=True)
    completed_items = models.JSONField(default=list, blank=True)
    cancel_sent_at = models.DateTimeField(null=True, blank=True)
    # The creation this run waits for while its outcome is unknown (pending reconciliation).
    pending_intent = models.ForeignKey(
        CreationIntent, on_delete=models.SET_NULL, null=True, blank=True, related_name="waiting_turns"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn_id"], condition=~Q(turn_id=""), name="rebyte_one_run_per_turn"),
        ]

    def __str__(self):
        return f"turn {self.turn_id or '(not yet known)'} of run {self.run_id}"


class DeletionState(models.TextChoices):
    PENDING = "pending"
    DONE = "done"


class DeletionOutcome(models.TextChoices):
    DELETED = "deleted"  # the provider confirmed the delete
    GONE = "gone"  # a read, or the delete itself, answered 404: it was deleted before (an answer lost, say)


class DeletionIntent(models.Model):
    """A remote delete we mean to make (a deleted conversation's session, a deleted account's agent), committed before
    the request goes out and kept until the provider is known to have deleted it.

    A delete whose answer was lost (a timeout, a dropped connection, a 5xx) may have happened: the intent stays
    pending with its attempt counted, and the next attempt reads first (404 proves the deletion) before deleting
    again. Each failure backs off (`not_before`); nothing gives up on its own: staff see pending intents in the admin.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="deletion_intents")
    kind = models.CharField(max_length=16, choices=IntentKind.choices)
    # The deleted conversation a session belonged to; null for the owner's agent.
    conversation = models.ForeignKey(
        "runtime.Conversation", on_delete=models.CASCADE, null=True, blank=True, related_name="deletion_intents"
    )
    remote_id = models.CharField(max_length=200, unique=True)
    state = models.CharField(max_length=16, choices=DeletionState.choices, default=DeletionState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When the next attempt may start: after a failure's backoff, or once the attempt under way has timed out.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    outcome = models.CharField(max_length=16, choices=DeletionOutcome.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            choice_constraint("kind", IntentKind, "rebyte_deletion_kind"),
            choice_constraint("state", DeletionState, "rebyte_deletion_state"),
            models.CheckConstraint(
                condition=Q(state="pending", outcome="")
                | Q(state="done", done_at__isnull=False, outcome__in=["deleted", "gone"]),
                name="rebyte_done_deletion_has_outcome",
            ),
        ]
        indexes = [
            models.Index(fields=["created_at"], condition=Q(state="pending"), name="rebyte_deletion_pending"),
        ]

    def __str__(self):
        return f"deletion of {self.kind} {self.remote_id} ({self.state})"
