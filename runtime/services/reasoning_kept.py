"""A reply's reasoning, kept when its run ends (docs/api.md "Progress (`run.progress`)"): what its progress events
said, and for how long the agent thought before the reply's first words.

The events are transient (compacted with the run's deltas once it has settled), so the run's end copies what they
said onto the assistant message, where the history reads it. Only the current attempt counts: a retried run's
earlier attempt reasoned about a reply that is gone.
"""

import math

from django.db.models import Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from runtime.events import unwritten
from runtime.models import Event, EventType, Run

_SHOWN_STEP_KINDS = frozenset({"thinking"})


def kept_reasoning(run: Run) -> dict | None:
    """`{text, seconds}` of the run's current attempt (its steps' Markdown in order, separated by blank lines; the
    seconds from its first step to the reply's first words after it, or to its last step without any), None if it
    did not reason. Inside the transaction that ends the run: events its fenced block has not written yet count."""
    submission_events = Event.objects.filter(submission_id=run.submission_id)
    # The attempt's start read within the same statement (a subquery).
    attempt_began = Coalesce(
        Subquery(submission_events.filter(type=EventType.SUBMISSION_ACCEPTED).order_by("-seq").values("seq")[:1]),
        0,
    )
    # Of the reply's deltas only the first after the first step tells anything (when the reply began): a long reply's
    # hundreds are not read.
    progress = submission_events.filter(seq__gt=attempt_began, type=EventType.RUN_PROGRESS)
    first_step = progress.filter(payload__kind__in=_SHOWN_STEP_KINDS).order_by("seq").values("seq")[:1]
    first_words = submission_events.filter(type=EventType.TEXT_DELTA, seq__gt=Subquery(first_step)).order_by("seq")
    columns = ("seq", "type", "payload", "created_at")
    written = [
        (kind, payload, at)
        for _, kind, payload, at in progress.values_list(*columns)
        .union(first_words.values_list(*columns)[:1], all=True)
        .order_by("seq")
    ]
    now = timezone.now()
    steps: dict[str, str] = {}
    began = last = replied = None
    for kind, payload, at in [*written, *((kind, payload, now) for kind, payload in unwritten(run.submission_id))]:
        if kind == EventType.TEXT_DELTA:
            replied = replied or (at if began is not None else None)
        elif kind == EventType.RUN_PROGRESS and payload.get("kind") in _SHOWN_STEP_KINDS:
            began, last = began or at, at
            said = steps.get(payload["stepId"], "")
            steps[payload["stepId"]] = payload["text"] if "text" in payload else said + payload["delta"]
    text = "\n\n".join(step.strip() for step in steps.values() if step.strip())
    if not text:
        return None
    return {"text": text, "seconds": max(1, math.ceil(((replied or last) - began).total_seconds()))}
