"""Approve or deny from a notification: single-use capabilities (docs/notifications.md "Approve or deny from the
notification").

The push sender mints one per decision for the approval a push announces; the raw tokens go into that push's
message only (encrypted to the browser), and only their SHA-256 is stored. Whoever holds one may give that one
decision on that one approval before its deadline, once: the decision itself goes through the page's own path
(`runtime.services.commands.answer_tool_approval`), which calls `spend` under the run's lock.
"""

import hashlib
import secrets
import uuid

from django.db import transaction
from django.utils import timezone

from core.error_codes import ErrorCode
from core.errors import Conflict, Gone, NotFound
from tools import locks
from tools.approvals import ApprovalAnswer
from tools.models import ApprovalCapability, ApprovalOutcome, ApprovalStatus, CapabilityDecision, ToolApproval

# 24 random bytes: 192 bits, 32 base64url characters.
TOKEN_BYTES = 24
TOKEN_PATTERN = r"^[A-Za-z0-9_-]{32}$"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def mint_for_call(tool_call_id) -> dict[str, str] | None:
    """One token per decision for the call's approval while it is pending ({decision: token}), None when it is not
    (decided, past its deadline, or none asked). Called by the push sender for each attempt of an approval push: a
    repeat of the push carries fresh tokens, and the unsent ones die with the approval's deadline."""
    with transaction.atomic(durable=True):
        approval = ToolApproval.objects.filter(
            tool_call_id=tool_call_id, status=ApprovalStatus.PENDING, expires_at__gt=timezone.now()
        ).first()
        if approval is None:
            return None
        tokens = {decision: secrets.token_urlsafe(TOKEN_BYTES) for decision in CapabilityDecision.values}
        ApprovalCapability.objects.bulk_create(
            ApprovalCapability(
                approval=approval, decision=decision, token_hash=token_hash(token), expires_at=approval.expires_at
            )
            for decision, token in tokens.items()
        )
        return tokens


def capability_for(*, token: str, approval_id: uuid.UUID, decision: str) -> ApprovalCapability:
    """The capability the token is, if it is bound to this approval and this decision; otherwise not found, the same
    answer whether the token is unknown or bound elsewhere, so a refusal tells nothing of other runs' tokens."""
    capability = (
        ApprovalCapability.objects.select_related("approval__tool_call__run__owner")
        .filter(token_hash=token_hash(token), approval_id=approval_id, decision=decision)
        .first()
    )
    if capability is None:
        raise NotFound("No such capability for this approval.")
    return capability


def answer_of(capability: ApprovalCapability) -> ApprovalAnswer:
    """The decision the capability allows, as the page's answer is recorded (its id names the capability)."""
    return ApprovalAnswer(
        approve=capability.decision == CapabilityDecision.APPROVE, client_decision_id=f"capability:{capability.id}"
    )


def spend(run, capability: ApprovalCapability) -> None:
    """Inside the answer's transaction, with the run locked (so two spends of one call take turns at it), before the
    decision is recorded: marks the capability used, or refuses it when it was used already, when its approval was
    decided otherwise (by the page, or by the other decision's capability), or when the deadline passed. A refusal
    raises, so the transaction, the mark with it, changes nothing."""
    approval = locks.lock_approval(locks.lock_tool_call(run.id, id=capability.approval_id))
    now = timezone.now()
    if not ApprovalCapability.objects.filter(id=capability.id, used_at__isnull=True).update(used_at=now):
        raise Conflict("This capability was already used; nothing changed.", code=ErrorCode.CAPABILITY_USED)
    if approval.outcome == ApprovalOutcome.TIMED_OUT or now >= capability.expires_at:
        raise Gone("The approval's deadline passed; nothing was decided.", code=ErrorCode.CAPABILITY_EXPIRED)
    # A cancelled run's approval is left to the answer's own refusal (410 approval_cancelled).
    if approval.status != ApprovalStatus.PENDING and approval.outcome != ApprovalOutcome.CANCELLED:
        raise Conflict("This approval was already decided; nothing changed.", code=ErrorCode.CAPABILITY_USED)
