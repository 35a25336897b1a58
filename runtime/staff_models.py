"""The audit of staff's actions on runs (kept apart from `runtime.models`, which re-exports it)."""

import uuid

from django.conf import settings
from django.db import models

from core.models import choice_constraint


class StaffRunActionKind(models.TextChoices):
    RETRY = "retry"
    CANCEL = "cancel"


class StaffRunActionOutcome(models.TextChoices):
    QUEUED_AGAIN = "queued_again"
    NOT_FAILED = "not_failed"
    REPLACED = "replaced"  # failed, but regenerated since: only the latest attempt is retried
    CANCELLED = "cancelled"
    CANCEL_REQUESTED = "cancel_requested"
    ALREADY_FINISHED = "already_finished"
    ALREADY_REQUESTED = "already_requested"


class StaffRunAction(models.Model):
    """Audit of what staff did to a run: one row per run, the rows of one admin action sharing a batch."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    batch = models.UUIDField()
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=16, choices=StaffRunActionKind.choices)
    run = models.ForeignKey("runtime.Run", on_delete=models.CASCADE, related_name="staff_actions")
    outcome = models.CharField(max_length=32, choices=StaffRunActionOutcome.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            choice_constraint("kind", StaffRunActionKind, "runtime_staff_action_kind"),
            choice_constraint("outcome", StaffRunActionOutcome, "runtime_staff_action_outcome"),
        ]
        indexes = [models.Index(fields=["batch"], name="runtime_staff_action_batch")]

    def __str__(self):
        return f"{self.kind} of run {self.run_id}: {self.outcome}"
