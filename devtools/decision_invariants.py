"""Invariants of what a person decides in the chaos run, checked after it over the database, the double's state and
the web server: edits of the last message (docs/api.md "Edit"), ratings of replies ("Feedback") and approvals
decided from the notification by a capability (docs/notifications.md "Approve or deny from the notification").

As in devtools/invariants.py, each check returns human-readable violations instead of asserting."""

from collections import Counter, defaultdict

import httpx

from devtools.invariants import PROBE_TIMEOUT_SECONDS, CheckedRun
from devtools.records import CapabilityAnswer, Command, ConversationRecord, Rating


def check_decisions(
    chaos: CheckedRun, double_state: dict, ratings: list[Rating], answers: list[CapabilityAnswer]
) -> list[str]:
    return [
        *check_edits(chaos),
        *check_edited_words_never_carried(chaos, double_state),
        *check_ratings(chaos, ratings),
        *check_capability_answers(chaos, answers),
    ]


def _edits(record: ConversationRecord) -> list[Command]:
    return [command for command in record.commands if command.edits]


def check_edits(chaos: CheckedRun) -> list[str]:
    """Each accepted edit made exactly one new version (its receipt's, with its words, in the edited message's line
    of versions), every version of a line is an accepted edit's or the first, and every earlier version and every
    reply the client saw accepted stay readable in history with their words."""
    from runtime.models import Message, Submission

    violations = []
    for record in (record for record in chaos.records if _edits(record)):
        accepted_versions = defaultdict(set)
        for command in _edits(record):
            edited = Message.objects.get(id=command.edits)
            line = edited.first_version_id or edited.id
            admitted = Submission.objects.filter(owner_id=record.user.id, client_message_id=command.client_message_id)
            version = admitted.select_related("user_message").first()
            version = version.user_message if version is not None else None
            where = f"edit {command.client_message_id} of message {command.edits}"
            if version is None or str(version.id) != command.user_message_id:
                violations.append(f"{where}: its version is not the receipt's {command.user_message_id}")
            elif version.first_version_id != line or version.text != command.text:
                violations.append(f"{where}: version {version.id} is not a new version of it with its words")
            accepted_versions[line].add(command.user_message_id)
        for line, versions in accepted_versions.items():
            stored = {str(v) for v in Message.objects.filter(first_version_id=line).values_list("id", flat=True)}
            if stored != versions:
                violations.append(
                    f"message {line}: versions {sorted(stored)} in the database, {sorted(versions)} accepted edits"
                )
        violations += _unreadable(chaos, record)
    return violations


def _unreadable(chaos: CheckedRun, record: ConversationRecord) -> list[str]:
    """The client's messages (every version it sent, every reply it was given) missing from the conversation's
    history or shown with other words than the database has."""
    from runtime.models import Message

    shown, after = {}, 0
    with httpx.Client(
        base_url=chaos.web_url, headers={"Authorization": f"Bearer {record.user.token}"}, timeout=PROBE_TIMEOUT_SECONDS
    ) as http:
        while True:
            path = f"/api/v1/tasks/{record.task_id}/conversation" if record.task_id else "/api/v1/conversation"
            page = http.get(path, params={"afterSequence": after, "limit": 100}).json()
            shown.update({message["id"]: message["text"] for message in page["messages"]})
            if not page["hasMore"]:
                break
            after = page["nextAfterSequence"]
    ids = {command.user_message_id for command in record.commands} | {c.reply_message_id for c in record.commands}
    ids.discard(None)
    stored = dict(Message.objects.filter(id__in=ids).values_list("id", "text"))
    return [
        f"conversation {record.index}: message {message_id} is not readable in its history as stored"
        for message_id, text in ((str(key), value) for key, value in stored.items())
        if shown.get(message_id) != text
    ] + [f"conversation {record.index}: message {message_id} is gone" for message_id in ids - {str(k) for k in stored}]


def check_edited_words_never_carried(chaos: CheckedRun, double_state: dict) -> list[str]:
    """No provider session of the conversation opened after an edit holds the edited-over words (neither in the
    carry it was seeded with nor later)."""
    from rebyte.models import RemoteSession
    from runtime.models import Submission

    sessions = {session["id"]: session for session in double_state["sessions"]}
    violations = []
    for record in chaos.records:
        for command in _edits(record):
            admitted_at = Submission.objects.get(id=command.submission_id).created_at
            later = RemoteSession.objects.filter(conversation_id=record.conversation_id, created_at__gt=admitted_at)
            for remote_id in later.values_list("remote_id", flat=True):
                if command.edited_text in _session_text(sessions.get(remote_id)):
                    violations.append(
                        f"edit {command.client_message_id}: session {remote_id}, opened after it, carries the "
                        f"edited-over words {command.edited_text!r}"
                    )
    return violations


def _session_text(session: dict | None) -> str:
    if session is None:
        return ""
    return "\n".join(
        part.get("text", "") for item in session["items"] if item["type"] == "message" for part in item["content"]
    )


def check_ratings(chaos: CheckedRun, ratings: list[Rating]) -> list[str]:
    """A reply's stored rating is the last one a PUT was acknowledged with (replies of conversations deleted since
    are gone with them)."""
    from runtime.models import Message

    live = {record.conversation_id for record in chaos.records}
    stored = {
        str(message_id): feedback
        for message_id, feedback in Message.objects.filter(
            id__in=[rating.message_id for rating in ratings]
        ).values_list("id", "feedback")
    }
    return [
        f"reply {rating.message_id}: rated {stored.get(rating.message_id)!r}, the last acknowledged {rating.rating!r}"
        for rating in ratings
        if rating.conversation_id in live and (stored.get(rating.message_id) or None) != rating.rating
    ]


def check_capability_answers(chaos: CheckedRun, answers: list[CapabilityAnswer]) -> list[str]:
    """A capability decides at most once, and an approval at most one of its capabilities; the approval a client
    decided by a capability carries that decision, by the capability it sent (whether a 200 acknowledged it, or its
    lost answer made the resend find it used), and no later spend changed it."""
    from tools.models import ApprovalCapability, ToolApproval

    owners = [user.id for user in chaos.users]
    used = Counter(
        ApprovalCapability.objects.filter(
            approval__tool_call__run__owner_id__in=owners, used_at__isnull=False
        ).values_list("approval_id", flat=True)
    )
    violations = [f"approval {approval}: {count} capabilities used" for approval, count in used.items() if count > 1]
    live = {record.conversation_id for record in chaos.records}
    for answer in (answer for answer in answers if answer.conversation_id in live):
        where = f"approval {answer.approval_id} ({answer.decision}, acknowledged: {answer.acknowledged})"
        approval = ToolApproval.objects.filter(tool_call_id=answer.approval_id).first()
        spent = ApprovalCapability.objects.filter(approval_id=answer.approval_id, used_at__isnull=False).first()
        expected = "approved" if answer.decision == "approve" else "denied"
        if approval is None or spent is None:
            violations.append(f"{where}: no approval, or no capability used")
        elif approval.status != expected or spent.decision != answer.decision:
            violations.append(f"{where}: decided {approval.status} by a capability to {spent.decision}")
        elif approval.client_decision_id != f"capability:{spent.id}":
            violations.append(f"{where}: recorded as decided by {approval.client_decision_id!r}")
    return violations
