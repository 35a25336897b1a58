import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.error_codes import ErrorCode
from core.models import choice_constraint


class SideEffect(models.TextChoices):
    READ = "read"  # may be repeated on retry
    TRANSACTIONAL = "transactional"  # acts once: its effect commits with the call's receipt
    UNCERTAIN = "uncertain"  # outside our database (hardware, audio): never repeated blindly


class ToolCallState(models.TextChoices):
    REQUESTED = "requested"
    AWAITING_APPROVAL = "awaiting_approval"  # a person must approve it before it is dispatched
    APPROVED = "approved"  # approved (maybe with edited arguments), not dispatched yet
    DISPATCHED = "dispatched"
    ACCEPTED = "accepted"  # a device claimed it: the request was taken, the outcome is not known yet
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"


FINISHED_TOOL_CALL_STATES = frozenset({ToolCallState.SUCCEEDED, ToolCallState.FAILED})

_TOOL_CALL_TRANSITIONS: dict[str, frozenset[str]] = {
    # A call refused before dispatch (unknown tool, bad arguments) fails without ever acting.
    ToolCallState.REQUESTED: frozenset(
        {ToolCallState.AWAITING_APPROVAL, ToolCallState.DISPATCHED, ToolCallState.FAILED}
    ),
    # Denied (by its owner, its deadline or a cancel) it fails without ever acting.
    ToolCallState.AWAITING_APPROVAL: frozenset({ToolCallState.APPROVED, ToolCallState.FAILED}),
    # A device call is dispatched by its approval (its invocation opens then); no device left to run it fails it.
    ToolCallState.APPROVED: frozenset({ToolCallState.DISPATCHED, ToolCallState.FAILED}),
    # dispatched -> dispatched is a retry of a read or a rolled-back transactional attempt.
    ToolCallState.DISPATCHED: frozenset(
        {
            ToolCallState.DISPATCHED,
            ToolCallState.ACCEPTED,
            ToolCallState.SUCCEEDED,
            ToolCallState.FAILED,
            ToolCallState.UNCERTAIN,
        }
    ),
    ToolCallState.ACCEPTED: frozenset({ToolCallState.SUCCEEDED, ToolCallState.FAILED, ToolCallState.UNCERTAIN}),
    # Only reconciliation settles an uncertain call, by recording what really happened.
    ToolCallState.UNCERTAIN: frozenset({ToolCallState.SUCCEEDED, ToolCallState.FAILED}),
    ToolCallState.SUCCEEDED: frozenset(),
    ToolCallState.FAILED: frozenset(),
}


class IllegalToolCallTransition(Exception):
    pass


class ToolCall(models.Model):
    """One function call the provider asked for; the provider's call id is unique within its run only."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey("runtime.Run", on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=64)
    side_effect = models.CharField(max_length=16, choices=SideEffect.choices, blank=True)
    # The arguments as parsed; `null` when the provider's text was not a JSON object.
    arguments = models.JSONField(null=True, blank=True)
    raw_arguments = models.TextField(blank=True)
    state = models.CharField(max_length=32, choices=ToolCallState.choices, default=ToolCallState.REQUESTED)
    attempts = models.PositiveSmallIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True)
    # What staff found out about an uncertain call (the agent was told the outcome was unknown).
    resolution_note = models.TextField(blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="tools_call_unique_per_run"),
            choice_constraint("state", ToolCallState, "tools_call_state"),
            # An uncertain action is never repeated blindly: one dispatch, ever.
            models.CheckConstraint(
                condition=~Q(side_effect="uncertain") | Q(attempts__lte=1), name="tools_uncertain_dispatched_once"
            ),
        ]
        indexes = [models.Index(fields=["run", "created_at"], name="tools_call_run")]

    def __str__(self):
        return f"{self.tool_name} {self.call_id} ({self.state})"

    def transition_to(self, new_state: str) -> None:
        """The single gate for state changes; the caller saves."""
        if new_state not in _TOOL_CALL_TRANSITIONS[self.state]:
            raise IllegalToolCallTransition(f"tool call {self.call_id}: {self.state} -> {new_state}")
        self.state = new_state


class ToolReceipt(models.Model):
    """The durable result of a call, saved before it is submitted upstream; a redelivery resubmits it."""

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="receipt")
    # `{"output": ...}` or `{"error": {"code", "message"}}`; the provider gets its canonical JSON text.
    result = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"receipt of {self.tool_call_id}"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"


class ApprovalOutcome(models.TextChoices):
    """Who or what decided: the owner (as asked, with edits, or no), the deadline, or a cancellation."""

    APPROVED = "approved"
    EDITED = "edited"
    # The three that fail the call are also its error code, which the agent reads.
    DENIED = ErrorCode.APPROVAL_DENIED.value
    TIMED_OUT = ErrorCode.APPROVAL_TIMEOUT.value
    CANCELLED = ErrorCode.RUN_CANCELLED.value


class ToolApproval(models.Model):
    """The gate in front of one call's dispatch: asked once, decided once, durably.

    Its key is the call's, so the id a client answers (`POST /tool-calls/{id}/approval`) names both.
    The arguments the agent asked with are kept here when the owner edits them: history is not rewritten.
    """

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, primary_key=True, related_name="approval")
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    outcome = models.CharField(max_length=32, choices=ApprovalOutcome.choices, blank=True)
    expires_at = models.DateTimeField()
    requested_arguments = models.JSONField()
    # The owner's answer as sent, so a replay (same clientDecisionId) can be told from a conflicting answer.
    client_decision_id = models.CharField(max_length=256, blank=True)
    answer = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)  # the owner's reason for a denial, told to the agent
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            choice_constraint("status", ApprovalStatus, "tools_approval_status"),
            models.CheckConstraint(
                condition=Q(status="pending", decided_at__isnull=True, outcome="")
                | (~Q(status="pending") & Q(decided_at__isnull=False) & ~Q(outcome="")),
                name="tools_approval_decided_has_outcome",
            ),
            models.CheckConstraint(
                condition=~Q(outcome__in=[ApprovalOutcome.APPROVED, ApprovalOutcome.EDITED, ApprovalOutcome.DENIED])
                | (~Q(client_decision_id="") & Q(answer__isnull=False)),
                name="tools_approval_owner_answer_kept",
            ),
        ]
        indexes = [models.Index(fields=["status", "expires_at"], name="tools_approval_pending")]

    def __str__(self):
        return f"approval of {self.tool_call_id} ({self.status})"


class CapabilityDecision(models.TextChoices):
    APPROVE = "approve"
    DENY = "deny"


class ApprovalCapability(models.Model):
    """A single-use right to give one decision on one approval, carried only inside an encrypted push (docs/
    notifications.md "Approve or deny from the notification"). Only the token's SHA-256 is kept: a copy of the
    database decides nothing. Used once, or its approval decided any other way, it decides nothing more."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    approval = models.ForeignKey(ToolApproval, on_delete=models.CASCADE, related_name="capabilities")
    decision = models.CharField(max_length=8, choices=CapabilityDecision.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()  # the approval's deadline
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [choice_constraint("decision", CapabilityDecision, "tools_capability_decision")]

    def __str__(self):
        return f"{self.decision} capability of {self.approval_id}"


class Device(models.Model):
    """A user's installation that runs foreground device tools (the web chat page is one)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="devices")
    installation_id = models.CharField(max_length=256)
    tools = models.JSONField(default=list)  # names of the device tools it can run
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "installation_id"], name="tools_device_installation"),
        ]

    def __str__(self):
        return f"device {self.id} of {self.owner_id}"


class InvocationStatus(models.TextChoices):
    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    REVOKED = "revoked"  # the device re-registered without the tool


# Still in the device's hands: listed as pending, and ended by a deadline, a cancel or a revocation.
OPEN_INVOCATION_STATUSES = (InvocationStatus.PENDING, InvocationStatus.CLAIMED)


class DeviceInvocation(models.Model):
    """A device tool call waiting for one device; only a claim authorises the device to execute it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="invocation")
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="invocations")
    status = models.CharField(max_length=16, choices=InvocationStatus.choices, default=InvocationStatus.PENDING)
    expires_at = models.DateTimeField()
    execution_id = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # The device's report exactly as posted, so an identical retry can be told from a conflicting one.
    result = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # The trace context of the span that created it: the device's claim and result, answered later over HTTP,
    # are traced as its children.
    traceparent = models.CharField(max_length=55, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            choice_constraint("status", InvocationStatus, "tools_invocation_status"),
            models.CheckConstraint(
                condition=Q(status="pending")
                | Q(status="expired")
                | Q(status="cancelled")
                | Q(status="revoked")
                | Q(execution_id__isnull=False),
                name="tools_claimed_invocation_has_execution",
            ),
            models.CheckConstraint(
                condition=~Q(status="completed") | Q(result__isnull=False), name="tools_completed_invocation_has_result"
            ),
        ]
        indexes = [models.Index(fields=["device", "status"], name="tools_invocation_device")]

    def __str__(self):
        return f"invocation {self.id} ({self.status})"


class Note(models.Model):
    """What `save_note` writes: one row per tool call at most, enforced by the database."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes")
    text = models.TextField()
    source_call = models.OneToOneField(ToolCall, on_delete=models.PROTECT, related_name="note")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-created_at"], name="tools_note_owner_recent")]

    def __str__(self):
        return self.text[:50]


class ToolPermission(models.Model):
    """An owner's standing "Always allow" for one tool: later calls of it by this owner run without asking. Granted
    only with an approval of a call of that tool, and only for a tool its registry entry marks `always_allowable`
    (docs/api.md "Tool approval"); revoked by its owner, deleted with the account."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tool_permissions")
    tool_name = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "tool_name"], name="tools_permission_owner_tool")]

    def __str__(self):
        return f"{self.owner_id} always allows {self.tool_name}"
