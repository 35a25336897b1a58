"""Invariants of the chaos run's newer write paths, checked after it over the database, the double's state, the web
server, the attachments' store and the push service: deletes (a Task, Main Chat cleared, an account), files,
regenerations, exports and pushes; through devtools/decision_invariants.py, edits, ratings and approvals decided
by a capability; and through devtools/standing_invariants.py, the owner's standing instructions and permissions.

As in devtools/invariants.py, each check returns human-readable violations instead of asserting."""

import uuid
from collections import defaultdict
from pathlib import Path
from typing import Protocol

import httpx

from devtools.decision_invariants import check_decisions
from devtools.invariants import PROBE_TIMEOUT_SECONDS, CheckedRun
from devtools.push_service import PushService
from devtools.records import (
    CapabilityAnswer,
    DeletedAccount,
    DeletedConversation,
    Export,
    InstructionsChange,
    PermissionChange,
    Rating,
    UploadedFile,
)
from devtools.standing_invariants import check_instructions, check_permissions
from devtools.websocket import Refused, WebsocketConnection


class LifecycleRun(CheckedRun, Protocol):
    deletions: list[DeletedConversation]
    account_deletions: list[DeletedAccount]
    account_errors: list[str]
    exports: list[Export]
    uploads: list[UploadedFile]
    attachment_dir: Path
    ratings: dict[str, Rating]
    capability_answers: list[CapabilityAnswer]
    instruction_changes: list[InstructionsChange]
    permission_changes: list[PermissionChange]

    @property
    def push_service(self) -> PushService: ...


def check_lifecycle(chaos: LifecycleRun) -> list[str]:
    double_state = chaos.stack.double.state()
    return [
        *chaos.account_errors,
        *check_deleted_conversations(chaos, double_state),
        *check_deleted_accounts(chaos, double_state),
        *check_files(chaos),
        *check_regenerations(chaos),
        *check_exports(chaos),
        *check_pushes(chaos),
        *check_decisions(chaos, double_state, list(chaos.ratings.values()), chaos.capability_answers),
        *check_instructions(chaos, chaos.instruction_changes, double_state),
        *check_permissions(chaos, chaos.permission_changes, "save_note"),
    ]


def _remote_sessions_of(double_state: dict, conversation_ids: set[str]) -> list[str]:
    return [
        session["id"]
        for session in double_state["sessions"]
        if session["metadata"].get("impo_conversation") in conversation_ids
    ]


def check_deleted_conversations(chaos: LifecycleRun, double_state: dict) -> list[str]:
    """A deleted conversation is 404 on every route, purged locally (its tombstone only) and gone at the provider."""
    from rebyte.models import CreationIntent, RemoteSession
    from runtime.models import Conversation, Event, Message, Submission

    violations = []
    for deleted in chaos.deletions:
        where = f"deleted {deleted.kind} conversation {deleted.conversation_id}"
        conversation = Conversation.objects.filter(id=deleted.conversation_id).first()
        if conversation is None or conversation.deleted_at is None or conversation.purged_at is None:
            violations.append(f"{where}: not a purged tombstone")
        left = {
            "messages": Message.objects.filter(conversation_id=deleted.conversation_id).count(),
            "submissions": Submission.objects.filter(conversation_id=deleted.conversation_id).count(),
            "events": Event.objects.filter(conversation_id=deleted.conversation_id).count(),
            "sessions": RemoteSession.objects.filter(conversation_id=deleted.conversation_id).count(),
            "creation intents": CreationIntent.objects.filter(conversation_id=deleted.conversation_id).count(),
        }
        violations += [f"{where}: {count} {rows} left" for rows, count in left.items() if count]
        if remote := _remote_sessions_of(double_state, {deleted.conversation_id}):
            violations.append(f"{where}: sessions {remote} left at the provider")
        violations += [f"{where}: {answer}" for answer in _routes_not_404(chaos, deleted)]
    return violations


def _routes_not_404(chaos: LifecycleRun, deleted: DeletedConversation) -> list[str]:
    probes = [("GET", f"/api/v1/conversations/{deleted.conversation_id}", None)]
    for submission_id in deleted.submission_ids:
        probes += [("GET", f"/api/v1/submissions/{submission_id}{tail}", None) for tail in ("", "/stream")]
    if deleted.task_id:
        message = {"clientMessageId": str(uuid.uuid4()), "text": "to a deleted task"}
        probes += [
            ("GET", f"/api/v1/tasks/{deleted.task_id}/conversation", None),
            ("POST", f"/api/v1/tasks/{deleted.task_id}/messages", message),
        ]
    answers = []
    headers = {"Authorization": f"Bearer {deleted.user.token}"}
    with httpx.Client(base_url=chaos.web_url, headers=headers, timeout=PROBE_TIMEOUT_SECONDS) as http:
        for method, path, body in probes:
            if (status := http.request(method, path, json=body).status_code) != 404:
                answers.append(f"{method} {path} answered {status}")
        if deleted.task_id in {task["taskId"] for task in http.get("/api/v1/tasks").json()["tasks"]}:
            answers.append("still in the tasks list")
        if http.get("/api/v1/conversation").json()["conversationId"] == deleted.conversation_id:
            answers.append("still the user's Main Chat")
    url = f"{chaos.ws_base}/ws/v1/conversations/{deleted.conversation_id}/?after=0&token={deleted.user.token}"
    try:
        WebsocketConnection(url).abort()
        answers.append("its websocket opened")
    except Refused:
        pass
    return answers


def check_deleted_accounts(chaos: LifecycleRun, double_state: dict) -> list[str]:
    """A deleted account is gone: its user row (and with it every row it had), its token, and at the provider its
    agent and every session of its conversations."""
    from django.contrib.auth import get_user_model

    violations = []
    for account in chaos.account_deletions:
        where = f"deleted account {account.user.id}"
        if get_user_model().objects.filter(id=account.user.id).exists():
            violations.append(f"{where}: the user row is still there")
        owner = str(account.user.id)
        if agents := [agent["id"] for agent in double_state["agents"] if agent["metadata"].get("impo_owner") == owner]:
            violations.append(f"{where}: agents {agents} left at the provider")
        if sessions := _remote_sessions_of(double_state, set(account.conversation_ids)):
            violations.append(f"{where}: sessions {sessions} left at the provider")
        headers = {"Authorization": f"Bearer {account.user.token}"}
        answer = httpx.get(f"{chaos.web_url}/api/v1/conversation", headers=headers, timeout=PROBE_TIMEOUT_SECONDS)
        if answer.status_code != 401:
            violations.append(f"{where}: its token answered {answer.status_code}")
    return violations


def files_meant_to_go(chaos: LifecycleRun) -> set[str]:
    """The uploads that must be gone once the run settles: deleted by their owner, left unsent (the orphan sweep),
    a deleted account's, or sent only in a conversation that was deleted."""
    deleted_conversations = {deleted.conversation_id for deleted in chaos.deletions}
    return {
        uploaded.client_id
        for uploaded in chaos.uploads
        if uploaded.fate != "sent" or uploaded.conversation_id in deleted_conversations
    }


def check_files(chaos: LifecycleRun) -> list[str]:
    """The store and the rows agree once the run settles: no deletion left decided and unfinished, every ready
    file's object in the store, no object in the store without a row; every file meant to go is gone (row and
    object), and every file sent in a conversation that lives on is ready."""
    from attachments.models import Attachment, AttachmentStatus

    rows = {
        str(client_id): (key, status)
        for client_id, key, status in Attachment.objects.values_list("client_id", "key", "status")
    }
    stored = {
        path.relative_to(chaos.attachment_dir).as_posix() for path in chaos.attachment_dir.rglob("*") if path.is_file()
    }
    keys = {key for key, _ in rows.values()}
    violations = [
        f"file {client_id}: its deletion was decided and never finished"
        for client_id, (_, status) in rows.items()
        if status == AttachmentStatus.DELETING
    ]
    violations += [
        f"file {client_id}: ready, but its object is not in the store"
        for client_id, (key, status) in rows.items()
        if status == AttachmentStatus.READY and key not in stored
    ]
    violations += [f"an object in the store has no row ({len(stored - keys)} such)"] if stored - keys else []
    meant_to_go = files_meant_to_go(chaos)
    for uploaded in chaos.uploads:
        where = f"file {uploaded.client_id} ({uploaded.fate})"
        if uploaded.client_id in meant_to_go and uploaded.client_id in rows:
            violations.append(f"{where}: still here")
        elif (
            uploaded.client_id not in meant_to_go
            and rows.get(uploaded.client_id, (None, None))[1] != AttachmentStatus.READY
        ):
            violations.append(f"{where}: sent in a live conversation, but not ready")
    return violations


def check_regenerations(chaos: LifecycleRun) -> list[str]:
    """One run per regenerate, answering the replaced reply's user message as the conversation's next message, in a
    provider session that is not the replaced reply's."""
    from runtime.models import Run, Submission

    violations = []
    for record in chaos.records:
        for command in (command for command in record.commands if command.regenerates):
            where = f"regenerate {command.client_message_id} of reply {command.regenerates}"
            runs = list(
                Run.objects.filter(
                    submission__owner_id=record.user.id, submission__client_message_id=command.client_message_id
                ).select_related("submission__assistant_message", "remote_turn")
            )
            replaced = Submission.objects.select_related("assistant_message", "run__remote_turn").get(
                assistant_message_id=command.regenerates
            )
            if len(runs) != 1:
                violations.append(f"{where}: {len(runs)} runs")
                continue
            run = runs[0]
            if run.submission.user_message_id != replaced.user_message_id:
                violations.append(f"{where}: answers another user message")
            if run.submission.assistant_message.sequence <= replaced.assistant_message.sequence:
                violations.append(f"{where}: its reply is not after the replaced one")
            if _session_of(run) is not None and _session_of(run) == _session_of(replaced.run):
                violations.append(f"{where}: ran in the replaced reply's session {_session_of(run)}")
    return violations


def _session_of(run) -> int | None:
    remote_turn = getattr(run, "remote_turn", None)
    return remote_turn.session_id if remote_turn is not None else None


def check_exports(chaos: LifecycleRun) -> list[str]:
    """An export holds every message of the user settled before it started, with its text (a conversation deleted
    by the time it ended may be left out)."""
    violations = []
    for number, export in enumerate(chaos.exports):
        for message_id, (conversation_id, text) in export.settled_before.items():
            if conversation_id in export.deleted_by_then:
                continue
            if message_id not in export.exported:
                violations.append(f"export {number} of user {export.user.id} lacks settled message {message_id}")
            elif export.exported[message_id] != text:
                violations.append(f"export {number} of user {export.user.id}: message {message_id}'s text differs")
    return violations


def check_pushes(chaos: LifecycleRun) -> list[str]:
    """At most one push per (run, kind, subscription) as the push service received it (a repeat after a crash
    carries the same Topic and replaces the first); every push the sender recorded as sent was received; none
    failed."""
    from webhooks.models import PushDelivery, PushStatus

    accepted = chaos.push_service.accepted
    chaos.figures.pushes = len(accepted)
    topics = defaultdict(set)
    for push in accepted:
        topics[(push.payload["runId"], push.payload["kind"], push.token)].add(push.topic)
    chaos.figures.push_repeats = len(accepted) - len(topics)
    violations = [
        f"run {run_id}: {len(distinct)} different {kind} pushes to one subscription"
        for (run_id, kind, _), distinct in topics.items()
        if len(distinct) > 1
    ]
    for delivery in PushDelivery.objects.select_related("notification", "subscription"):
        key = (str(delivery.notification.run_id), delivery.kind, delivery.subscription.endpoint.rsplit("/", 1)[-1])
        if delivery.status == PushStatus.SENT and key not in topics:
            violations.append(f"push delivery {delivery.id} is sent but the push service never received it")
        elif delivery.status == PushStatus.FAILED:
            violations.append(f"push delivery {delivery.id} failed: {delivery.last_error}")
    return violations
