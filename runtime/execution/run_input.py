"""What a run's input says to the provider (docs/design.md §3, §12), built from its submission alone, so that an input
rebuilt after a crash, or resent under the run's key, is the same:
- a new session's first input: the carry of the conversation's last completed turns, then the user's words and
  files; its instructions say when and where the message was written and which device tools its turns may use;
- a later message of a session: one line with its own date and zone, then the user's words and files.

The user's words are left out when blank (a message of files alone). A file is sent as the SDK's content part
(`attachments.provider_parts.input_part`: an image's clean copy, a document's text), read from what is stored when
the input is sent. A new session's first input is kept on its creation intent as it is built here, each file named
by reference (`{"attachment": id}`), and `provider_content` makes the content at each create: the intent never holds
a file's bytes, and whichever worker (or the sweeper's reconciler) sends it sends the same.
"""

from attachments.models import Attachment
from attachments.provider_parts import input_part
from rebyte.client import InputPart
from rebyte.instructions import MessageMoment, message_context_line, session_instructions
from runtime import selectors
from runtime.models import Submission

CARRY_HEADING = "Earlier in this conversation (context, not a new request):\n"


def _moment(submission: Submission) -> MessageMoment:
    return MessageMoment.of(submission.client_context, submitted_at=submission.created_at)


def new_session_instructions(submission: Submission, *, device_tools: list[str], owner_instructions: str) -> str:
    return session_instructions(_moment(submission), device_tools=device_tools, owner_instructions=owner_instructions)


def first_input_parts(submission: Submission, *, carry: bool, file_ids: list) -> list:
    """The first input of a new session as its creation intent keeps it (files by reference; `file_ids`: those the
    message carries, in the order sent, as `runtime.selectors.run_to_execute` read them)."""
    earlier = selectors.carry_of(submission.conversation_id, submission.user_message.sequence) if carry else ""
    return [f"{CARRY_HEADING}{earlier}"] * bool(earlier) + _message(submission, file_ids)


def message_parts(submission: Submission, file_ids: list) -> list[InputPart]:
    """A later message of a session, as sent (`file_ids` as `first_input_parts` takes them)."""
    return provider_content([message_context_line(_moment(submission)), *_message(submission, file_ids)])


def provider_content(parts: list) -> list[InputPart]:
    """An input as sent: each file reference replaced by the file's part, read now (one query for the files)."""
    referenced = [part["attachment"] for part in parts if isinstance(part, dict)]
    files = Attachment.objects.in_bulk(referenced) if referenced else {}
    return [
        input_part(files[part["attachment"]], files_in_message=len(referenced)) if isinstance(part, dict) else part
        for part in parts
    ]


def _message(submission: Submission, file_ids: list) -> list:
    """The user's words (unless blank), then each file the message carries, by reference, in the order sent."""
    message = submission.user_message
    words = [message.text] if message.text.strip() else []
    return words + [{"attachment": attachment_id} for attachment_id in file_ids]
