"""One chaos client driving one conversation over REST until the window closes: messages (tool calls among them,
some asking approval, decided from the notification; files uploaded before some: sent with them, deleted or left
unsent), resends of a lost 202, cancels, regenerations of the last reply, edits of the last message (sometimes while
its reply runs), ratings of a reply, exports of the account, rewrites of the user's instructions, and deletes (a
Task, or Main Chat cleared, with its run in flight or settled), after which it goes on in a new conversation."""

import json
import random
import time
import uuid
from typing import TYPE_CHECKING

import httpx

from devtools.records import Command, ConversationRecord, DeletedConversation
from tests.chaos.approvals import approval_text, decide
from tests.chaos.branches import ENDED_STATES, edit, rate
from tests.chaos.clients import WORDS, accepted, request, settled_submission
from tests.chaos.exports import export
from tests.chaos.instructions import rewrite
from tests.chaos.permissions import approve_note, maybe_revoke
from tests.chaos.uploads import FATES, delete, upload

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

# How often, per message, a client does each of the other commands.
RESEND, CANCEL, REGENERATE, EXPORT, DELETE_IN_FLIGHT, DELETE_SETTLED = 0.2, 0.08, 0.15, 0.04, 0.03, 0.03
UPLOAD = 0.3  # a file uploaded before the message
# An edit of the last message while its reply may still run, or once it has ended; a rating of the reply.
EDIT_RUNNING, EDIT, RATE = 0.06, 0.1, 0.2
INSTRUCTIONS = 0.05  # the user's standing instructions rewritten before the message
APPROVAL = 0.4  # of the tool commands, how many ask approval (decided from the notification)


class ConversationDriver:
    def __init__(self, run: "ChaosRun", record: ConversationRecord, rng: random.Random):
        self.run = run
        self.record = record
        self.rng = rng
        # Every other conversation (Main Chats and Tasks) is deleted once among its first messages, so a short run
        # deletes too, its run in flight or settled; after that, and the others, at the rates above.
        planned = rng.randrange(run.config.messages_per_conversation)
        self.planned_delete = planned if record.index % 2 else None
        # Each user's instructions are rewritten once from Main Chat among its first messages, so a short run has
        # turns on both sides of a change; after that, from any conversation at the rate above.
        planned = rng.randrange(run.config.messages_per_conversation)
        self.planned_rewrite = planned if record.kind == "main_chat" else None

    def drive(self) -> None:
        """At least `messages_per_conversation` commands, and on until the window closes."""
        try:
            with httpx.Client(
                base_url=self.run.web_url, headers={"Authorization": f"Bearer {self.record.user.token}"}, timeout=20
            ) as http:
                number = 0
                while number < self.run.config.messages_per_conversation or time.monotonic() < self.run.deadline:
                    self._exchange(http, number)
                    number += 1
                    time.sleep(self.rng.uniform(0, 0.4))  # a user's think time, to spread the load
        except Exception as exc:  # noqa: BLE001  (a crashed driver is reported as a violation, not lost)
            self.record.errors.append(f"driver crashed: {exc!r}")

    def _exchange(self, http: httpx.Client, number: int) -> None:
        if number == self.planned_rewrite or self.rng.random() < INSTRUCTIONS:
            rewrite(self.run, http, self.rng, self.record.user)
        if self.run.config.tools:
            maybe_revoke(self.run, http, self.rng, self.record.user)
        command = self._send(http, number, self._upload(http))
        if self.record.index not in self.run.watchers:
            self.run.watch(self.record)
        # A reply asking approval is neither regenerated nor edited: nobody would be there to decide again.
        asks_approval = command.text == approval_text()
        if asks_approval:
            decide(self.run, self.rng, self.record, command)
        elif command.note_text is not None:
            approve_note(self.run, http, self.rng, self.record, command)
        self._maybe_resend_and_cancel(http, command, cancel=not asks_approval)
        planned = number == self.planned_delete
        if self.rng.random() < DELETE_IN_FLIGHT or (planned and self.rng.random() < 0.5):
            self._delete(http)
            return
        if not asks_approval and self.rng.random() < EDIT_RUNNING:
            command = self._edit(http, command)
        submission = settled_submission(http, command.submission_id)
        regenerable = command.note_text is None and not asks_approval
        while regenerable and submission["status"] in ENDED_STATES and self.rng.random() < REGENERATE:
            command = self._regenerate(http, command, submission["messageId"])
            submission = settled_submission(http, command.submission_id)
        if not asks_approval and self.rng.random() < EDIT:
            command = self._edit(http, command)
            submission = settled_submission(http, command.submission_id)
        if submission["status"] in ENDED_STATES and self.rng.random() < RATE:
            rate(self.run, http, self.rng, self.record, command)
        if self.rng.random() < EXPORT:
            export(self.run, http, self.record.user)
        if self.rng.random() < DELETE_SETTLED or planned:
            self._delete(http)

    def _upload(self, http: httpx.Client) -> list:
        """Now and then a file: the ones to send with the next message (the others deleted, or left unsent)."""
        if self.rng.random() >= UPLOAD:
            return []
        uploaded = upload(self.run, http, self.record.user, self.rng, self.rng.choice(FATES))
        if uploaded.fate == "deleted":
            delete(self.run, http, uploaded)
        return [uploaded] if uploaded.fate == "sent" else []

    def _send(self, http: httpx.Client, number: int, files: list) -> Command:
        record, note_text = self.record, None
        # A tool command carries no files: the echo agent would read the file's words as the tool's arguments.
        if self.run.config.tools and not files and self.rng.random() < 0.25 * APPROVAL:
            text = approval_text()
        elif self.run.config.tools and not files and self.rng.random() < 0.25:
            note_text = f"note {record.index}.{number} {uuid.uuid4().hex[:8]}"
            text = "/tool save_note " + json.dumps({"text": note_text})
        else:
            words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(2, 9)))
            text = f"chaos {record.index}.{number} {words}"
        body = {"clientMessageId": str(uuid.uuid4()), "text": text}
        if files:
            body["attachmentIds"] = [uploaded.client_id for uploaded in files]
        if record.kind == "task" and record.task_id is None:
            receipt = accepted(http, "POST", "/api/v1/tasks", body)
            record.task_id, record.conversation_id = receipt["taskId"], receipt["conversationId"]
        elif record.kind == "task":
            receipt = accepted(http, "POST", f"/api/v1/tasks/{record.task_id}/messages", body)
        else:
            receipt = accepted(http, "POST", "/api/v1/conversation/messages", body)
            if record.conversation_id is None:
                record.conversation_id = request(http, "GET", "/api/v1/conversation").json()["conversationId"]
        command = Command(
            body["clientMessageId"],
            text,
            receipt["submissionId"],
            note_text=note_text,
            user_message_id=receipt["userMessageId"],
            reply_message_id=receipt["replyMessageId"],
        )
        command.attachment_ids = body.get("attachmentIds", [])
        command.file_notes = "".join(f" [image {width}x{height} png]" for width, height in (f.size for f in files))
        for uploaded in files:
            uploaded.conversation_id = record.conversation_id
        record.commands.append(command)
        self.run.figures.commands_by_kind["message"] += 1
        return command

    def _maybe_resend_and_cancel(self, http: httpx.Client, command: Command, *, cancel: bool) -> None:
        record = self.record
        if self.rng.random() < RESEND:
            # The client lost the 202 and posts the same command again: it must get the same receipt.
            self.run.faults.count("client_resend")
            path = {
                ("task", True): "/api/v1/tasks",
                ("task", False): f"/api/v1/tasks/{record.task_id}/messages",
            }.get((record.kind, len(record.commands) == 1), "/api/v1/conversation/messages")
            body = {"clientMessageId": command.client_message_id, "text": command.text}
            if command.attachment_ids:
                body["attachmentIds"] = command.attachment_ids
            self._expect_same_receipt(command, accepted(http, "POST", path, body))
        if cancel and self.rng.random() < CANCEL:
            time.sleep(self.rng.uniform(0, 0.5))  # cancel at a random point of the run
            self.run.faults.count("client_cancel")
            command.cancel_requested = True
            request(http, "POST", f"/api/v1/submissions/{command.submission_id}/cancel", {}).raise_for_status()

    def _expect_same_receipt(self, command: Command, receipt: dict) -> None:
        if receipt["submissionId"] != command.submission_id:
            self.record.errors.append(
                f"resent {command.client_message_id} got submission {receipt['submissionId']}, "
                f"not the original {command.submission_id}"
            )

    def _regenerate(self, http: httpx.Client, replaced: Command, message_id: str) -> Command:
        """Another reply to the same words (sometimes posted twice, as after a lost 202: one attempt only)."""
        path, body = f"/api/v1/messages/{message_id}/regenerate", {"clientMessageId": str(uuid.uuid4())}
        receipt = accepted(http, "POST", path, body)
        command = Command(
            body["clientMessageId"],
            replaced.text,
            receipt["submissionId"],
            regenerates=message_id,
            user_message_id=receipt["userMessageId"],
            reply_message_id=receipt["replyMessageId"],
        )
        command.file_notes = replaced.file_notes  # a regeneration sends the same files again
        self.record.commands.append(command)
        self.run.figures.commands_by_kind["regenerate"] += 1
        if self.rng.random() < RESEND:
            self.run.faults.count("client_resend")
            self._expect_same_receipt(command, accepted(http, "POST", path, body))
        return command

    def _edit(self, http: httpx.Client, edited: Command) -> Command:
        """The last message edited (its reply perhaps still running); the command the exchange goes on with."""
        version = edit(self.run, http, self.rng, edited, self.record.index)
        if version is None:
            return edited
        self.record.commands.append(version)
        return version

    def _delete(self, http: httpx.Client) -> None:
        """Deletes the conversation (its last run perhaps still in flight); the client goes on in a new one."""
        record = self.record
        watcher = self.run.watchers.pop(record.index, None)
        if watcher is not None:
            watcher.expect_deletion()
        task = record.kind == "task"
        path = f"/api/v1/tasks/{record.task_id}" if task else "/api/v1/conversation"
        if accepted(http, "DELETE", path) != {"deleted": True}:
            record.errors.append(f"DELETE {path} did not answer {{'deleted': true}}")
        if watcher is not None:
            watcher.stop()
        self.run.deletions.append(
            DeletedConversation(
                user=record.user,
                kind=record.kind,
                conversation_id=record.conversation_id,
                task_id=record.task_id,
                submission_ids=[command.submission_id for command in record.commands],
            )
        )
        self.run.figures.commands_by_kind["task_delete" if task else "main_chat_clear"] += 1
        self.run.accepted_before_deletes += len(record.commands)
        record.forget_conversation()
