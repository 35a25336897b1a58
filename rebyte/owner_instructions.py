"""The owner's standing instructions to their agent (docs/design.md §3 "Custom instructions"): written on the account
page, read when a run's turn starts.

An agent keeps its instructions for life (the provider has no call that changes them), and so does a session. A
change is therefore one row written here, nothing else: a run's turn starts (its input marked sent) in a transaction
that shares the owner's instructions lock and compares the instructions of the agent its session serves with these,
so a turn that starts after a change committed goes to a new session of a new agent (`rebyte.services`), and a turn
that started before keeps its own to the end. The agent they replace is deleted at the provider once no turn uses it
(`rebyte.agent_retirement`).
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Subquery, TextField, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from rebyte import locks
from rebyte.models import OwnerInstructions


@dataclass(frozen=True)
class Instructions:
    text: str
    updated_at: datetime | None


def instructions_of(owner_id) -> Instructions:
    row = OwnerInstructions.objects.filter(owner_id=owner_id).first()
    return Instructions(row.text, row.updated_at) if row else Instructions("", None)


def instructions_text(owner) -> Coalesce:
    """The owner's instructions ('' for none) as an expression of `owner` (an id or an `OuterRef`), for a query that
    reads them with what it reads anyway (a run's claim)."""
    text = Subquery(OwnerInstructions.objects.filter(owner_id=owner).values("text")[:1])
    return Coalesce(text, Value(""), output_field=TextField())


def held_instructions(owner_id) -> str:
    """Inside the transaction that starts a run's turn: the owner's instructions, which stay as read until it ends."""
    locks.share_owner_instructions(owner_id)
    return instructions_of(owner_id).text


def set_instructions(owner, text: str) -> Instructions:
    """The owner's new instructions (blank: none), applying from the next turn. Writing the same text again changes
    nothing (its time included)."""
    text = text.strip()  # bounded by the API's check, and by the database's (`rebyte_owner_instructions_bounded`)
    with transaction.atomic(durable=True):
        # Waits for every run whose turn is starting, and holds off the next ones until this commits.
        locks.lock_owner_instructions(owner.pk)
        current = instructions_of(owner.pk)
        if current.text == text:
            return current
        row, _ = OwnerInstructions.objects.update_or_create(
            owner_id=owner.pk, defaults={"text": text, "updated_at": timezone.now()}
        )
    return Instructions(row.text, row.updated_at)
