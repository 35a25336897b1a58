"""What a run's input says to the provider (docs/design.md §3), built from its submission alone, so that an input
rebuilt after a crash, or resent under the run's key, is the same:
- a new session's first input: the carry of the conversation's last completed turns, then the user's words; its
  instructions say when and where the message was written and which device tools its turns may use;
- a later message of a session: one line with its own date and zone, then the user's words.
"""

from rebyte.instructions import MessageMoment, message_context_line, session_instructions
from runtime import selectors
from runtime.models import Submission

CARRY_HEADING = "Earlier in this conversation (context, not a new request):\n"


def _moment(submission: Submission) -> MessageMoment:
    return MessageMoment.of(submission.client_context, submitted_at=submission.created_at)


def new_session_instructions(submission: Submission, *, device_tools: list[str]) -> str:
    return session_instructions(_moment(submission), device_tools=device_tools)


def first_input_parts(submission: Submission, *, carry: bool) -> list[str]:
    earlier = selectors.carry_of(submission.conversation_id, submission.user_message.sequence) if carry else ""
    return [f"{CARRY_HEADING}{earlier}"] * bool(earlier) + [submission.user_message.text]


def message_parts(submission: Submission) -> list[str]:
    return [message_context_line(_moment(submission)), submission.user_message.text]
