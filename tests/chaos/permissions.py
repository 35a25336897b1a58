"""The chaos run's standing permissions (docs/api.md "Tool approval"): in its stack `save_note` asks its owner's
approval unless the owner always allows it. The user approves a note's call in the app (the API, with their token),
now and then with "Always allow"; now and then they revoke that on the account page. Notes are always approved: a
denied one would leave what its reply says unknown. Each grant and revocation is kept with when it was sent and
acknowledged, for devtools/standing_invariants.py."""

import random
import time
import uuid
from typing import TYPE_CHECKING

import httpx

from devtools.records import ChaosUser, Command, ConversationRecord, PermissionChange
from tests.chaos.approvals import approval_pushes
from tests.chaos.clients import request

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

NOTE_TOOL = "save_note"
ALWAYS_ALLOW, REVOKE = 0.3, 0.1
# A call its run no longer waits on (the run failed or was cancelled meanwhile) cannot be decided.
UNDECIDABLE = {"approval_cancelled", "approval_expired"}


def approve_note(run: "ChaosRun", http: httpx.Client, rng: random.Random, record: ConversationRecord, command: Command):
    """Approves the note's call once its approval push arrives (none comes when the user always allows notes, or the
    run ended first), sometimes with "Always allow"."""
    pushes = approval_pushes(run, record, command)
    if not pushes:
        return
    call_id = pushes[0].payload["toolCallId"]
    remember = rng.random() < ALWAYS_ALLOW
    grant = PermissionChange(record.user, "grant", sent_at=time.time()) if remember else None
    if grant:
        run.permission_changes.append(grant)
    body = {"decision": "approve", "clientDecisionId": str(uuid.uuid4()), "remember": remember}
    response = request(http, "POST", f"/api/v1/tool-calls/{call_id}/approval", body)
    if response.status_code == 409 and response.json()["error"]["code"] in UNDECIDABLE:
        return
    if response.status_code != 200 or response.json().get("status") != "approved":
        record.errors.append(f"note approval {call_id} answered {response.status_code}: {response.text[:300]}")
        return
    if grant:
        grant.acknowledged_at = time.time()
    run.figures.commands_by_kind["always_allow" if remember else "note_approval"] += 1


def maybe_revoke(run: "ChaosRun", http: httpx.Client, rng: random.Random, user: ChaosUser) -> None:
    """Now and then the user takes "Always allow" for notes back (404 when there was none, or a resent revocation
    whose first answer was lost)."""
    if rng.random() >= REVOKE:
        return
    revocation = PermissionChange(user, "revoke", sent_at=time.time())
    run.permission_changes.append(revocation)
    response = request(http, "DELETE", f"/api/v1/account/tool-permissions/{NOTE_TOOL}")
    if response.status_code not in (200, 404):
        run.account_errors.append(f"revoking {NOTE_TOOL} answered {response.status_code}: {response.text[:300]}")
        return
    revocation.acknowledged_at = time.time()
    run.figures.commands_by_kind["permission_revoke"] += 1
