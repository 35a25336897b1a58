"""Model helpers every app shares."""

from django.db import models
from django.db.models import Q


def choice_constraint(field: str, choices: type[models.Choices], name: str) -> models.CheckConstraint:
    """The database's own check that a choice field holds one of its choices (a write around the ORM included)."""
    return models.CheckConstraint(condition=Q(**{f"{field}__in": choices.values}), name=name)
