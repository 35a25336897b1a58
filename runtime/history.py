"""History: how a conversation's messages read on the wire (docs/api.md "Messages and tasks"), each with what the
rows around it say of it — its files, versions, tool calls, run and attempts — read for a whole page at once."""

import uuid

from attachments.selectors import file_part, files_by_message
from runtime.attempts import NO_VERSIONS, attempt_ids_by_user_message, versions_to_wire
from runtime.models import Message, MessageRole, Run
from tools.selectors import tool_states_by_assistant_message


def messages_to_wire(messages: list[Message]) -> list[dict]:
    """Messages as history shows them: a user's with the files it carries (`parts`, only when it carries some) and
    its place among the versions of it (docs/api.md "Edit"), each reply with its tool calls, why its run failed, if it
    did, and its place among the attempts at its user message (docs/api.md "Regenerate"). One query each for all the
    messages' files, tools, runs, attempts and versions."""
    assistant_ids = [m.id for m in messages if m.role == MessageRole.ASSISTANT]
    files = files_by_message([m.id for m in messages if m.role == MessageRole.USER])
    tool_states = tool_states_by_assistant_message(assistant_ids)
    runs = _runs_by_assistant_message(assistant_ids)
    attempts = attempt_ids_by_user_message(user_message_id for _, _, user_message_id, _ in runs.values())
    versions = versions_to_wire(m for m in messages if m.role == MessageRole.USER)
    no_run = (None, None, None, 0)
    wire = []
    for message in messages:
        shown = _message_to_wire(
            message, tool_states.get(message.id, []), runs.get(message.id, no_run), attempts
        ) | versions.get(message.id, NO_VERSIONS)
        if message.id in files:
            shown["parts"] = [file_part(attachment) for attachment in files[message.id]]
        wire.append(shown)
    return wire


def _runs_by_assistant_message(message_ids) -> dict[uuid.UUID, tuple[str, dict | None, uuid.UUID, int]]:
    """Each of these replies' submission id, why its run failed (or is parked) as the terminal event said it, the
    user message it answers, and how often it was tried again after failing."""
    runs = Run.objects.filter(submission__assistant_message_id__in=message_ids).values_list(
        "submission__assistant_message_id",
        "submission_id",
        "error_code",
        "error_message",
        "error_retryable",
        "submission__user_message_id",
        "retries",
    )
    return {
        assistant_message_id: (
            str(submission_id),
            {"code": code, "message": message, "retryable": retryable} if code else None,
            user_message_id,
            retries,
        )
        for assistant_message_id, submission_id, code, message, retryable, user_message_id, retries in runs
    }


def _message_to_wire(message: Message, tools: list[dict], run: tuple, attempts: dict) -> dict:
    submission_id, error, reply_to, retries = run
    attempt_ids = attempts.get(reply_to, [])
    return {
        "id": str(message.id),
        "role": message.role,
        "sequence": message.sequence,
        "text": message.text,
        "status": message.status,
        "createdAt": message.created_at.isoformat(),
        "submissionId": submission_id,
        "tools": tools,
        "error": error,
        "retries": retries,
        "replyTo": str(reply_to) if reply_to else None,
        "attempt": attempt_ids.index(message.id) + 1 if attempt_ids else None,
        "attemptIds": [str(attempt_id) for attempt_id in attempt_ids],
        "feedback": message.feedback or None,
        "reasoning": {"text": message.reasoning, "seconds": message.reasoning_seconds} if message.reasoning else None,
    }
