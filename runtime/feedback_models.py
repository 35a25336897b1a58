"""The owner's rating of a reply (thumbs up or down), kept on the reply's own Message row (runtime/models.py)."""

from django.db import models
from django.db.models import Q


class Feedback(models.TextChoices):
    UP = "up"
    DOWN = "down"


def feedback_constraint() -> models.CheckConstraint:
    """A rating is one of the choices, and only a reply (an assistant message) has one; "" is none."""
    return models.CheckConstraint(
        condition=Q(feedback="") | Q(role="assistant", feedback__in=Feedback.values),
        name="runtime_message_feedback_of_a_reply",
    )
