"""The owners' notifications outbox (docs/design.md §10), apart from runtime/models.py for its size; the models
module imports it, so Django and callers find it there."""

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.models import choice_constraint


class NotificationKind(models.TextChoices):
    """What a run's owner is told about (docs/design.md §10)."""

    COMPLETED = "completed", "reply finished"
    FAILED = "failed", "reply failed"
    CANCELLED = "cancelled", "reply cancelled by someone else"
    APPROVAL = "approval", "approval waiting"
    RECONCILIATION = "reconciliation", "reply held for checking"


class Notification(models.Model):
    """The outbox of what a run's owner must hear about, written in the transaction that put the run in that state
    (`services.lifecycle`): a committed state always has its notification, a rolled-back one never does. At most one
    per run and kind; the push sender (the webhooks app) marks each `dispatched_at` once it made the deliveries."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey("runtime.Run", on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=16, choices=NotificationKind.choices)
    created_at = models.DateTimeField(default=timezone.now)
    dispatched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "kind"], name="runtime_one_notification_per_run_kind"),
            choice_constraint("kind", NotificationKind, "runtime_notification_kind"),
        ]
        indexes = [
            models.Index(
                fields=["created_at"], condition=Q(dispatched_at__isnull=True), name="runtime_notification_due"
            )
        ]

    def __str__(self):
        return f"{self.kind} notification of run {self.run_id}"
