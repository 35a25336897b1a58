import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from core.models import choice_constraint

PLAN_TITLE_MAX = 120
PLAN_GOAL_MAX = 4_000


class Plan(models.Model):
    """What to ask (title, goal) and when (schedule). The database owns it; Temporal only times it.

    `revision` is the client's optimistic-concurrency token (a new UUID on every change). `generation` counts
    the same changes in order, so the plan's workflow can tell a newer signal from a late, older one, and
    `synced_generation` records the newest generation Temporal acknowledged: a plan whose workflow is behind is
    visible in the database, which is what the discovery loop re-signals from.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="plans")
    client_request_id = models.CharField(max_length=256)
    # SHA-256 of the canonical create command: a replay of the request id must match it to get the plan.
    request_fingerprint = models.CharField(max_length=64)
    title = models.CharField(max_length=PLAN_TITLE_MAX)
    goal = models.TextField()
    # The canonical form (`Schedule.to_json`): every key present, runAt in UTC.
    schedule = models.JSONField()
    enabled = models.BooleanField()
    revision = models.UUIDField(default=uuid.uuid4)
    generation = models.PositiveBigIntegerField(default=1)
    synced_generation = models.PositiveBigIntegerField(default=0)
    # When the current revision took effect: its occurrences are the fire times after this instant.
    revised_at = models.DateTimeField()
    # The change that produced the current revision, so an exact retry of that PUT returns the saved plan.
    previous_revision = models.UUIDField(null=True, blank=True)
    change_fingerprint = models.CharField(max_length=64, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        # The table (and the API's `scheduled-tasks` resource) keep the first name; only the code's name changed.
        db_table = "scheduling_scheduledtask"
        constraints = [
            models.UniqueConstraint(fields=["owner", "client_request_id"], name="scheduling_plan_client_request"),
            models.CheckConstraint(
                condition=Q(synced_generation__lte=F("generation")), name="scheduling_plan_synced_not_ahead"
            ),
            models.CheckConstraint(condition=Q(generation__gte=1), name="scheduling_plan_generation_positive"),
        ]
        indexes = [
            models.Index(fields=["owner", "created_at"], name="scheduling_plan_owner_created"),
            models.Index(
                fields=["generation"],
                condition=Q(synced_generation__lt=F("generation")),
                name="scheduling_plan_unsynced",
            ),
        ]

    def __str__(self):
        return self.title

    @property
    def is_live(self) -> bool:
        return self.deleted_at is None


class OccurrenceState(models.TextChoices):
    ADMITTED = "admitted"
    SKIPPED_OVERLAP = "skipped_overlap"


class Occurrence(models.Model):
    """One handled fire time of a plan: the Task it admitted, or the record that it was skipped.

    Unique per (plan, fire time), which is what makes admission idempotent when Temporal runs the activity twice.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="occurrences")
    revision = models.UUIDField()
    scheduled_at = models.DateTimeField()
    state = models.CharField(max_length=32, choices=OccurrenceState.choices)
    # PROTECT: a plan's history must keep pointing at the work it admitted.
    task = models.OneToOneField(
        "runtime.Task", on_delete=models.PROTECT, null=True, blank=True, related_name="occurrence"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The table (and the API's `runs` of a plan) keep the first name; only the code's name changed.
        db_table = "scheduling_scheduledrun"
        constraints = [
            models.UniqueConstraint(fields=["plan", "scheduled_at"], name="scheduling_run_once_per_fire_time"),
            choice_constraint("state", OccurrenceState, "scheduling_run_state"),
            models.CheckConstraint(
                condition=(Q(state="admitted") & Q(task__isnull=False))
                | (Q(state="skipped_overlap") & Q(task__isnull=True)),
                name="scheduling_run_task_iff_admitted",
            ),
        ]

    def __str__(self):
        return f"{self.state} at {self.scheduled_at.isoformat()}"
