"""Projection: what a run's provider output becomes in the event log a client reads.

New reply text is appended to the assistant message and projected as `text.delta` / `message.completed` events,
in order, inside the transaction that fenced every run given (a run's own fenced write or a process's group commit).
The agent's progress (its reasoning summaries) goes with it as `run.progress` events, and only as events: it is
never the message's text.
"""

from dataclasses import dataclass

from django.db import connection

from runtime.events import append_events, batched
from runtime.models import EventType, MessageStatus, Run

# A reply's parts (the turn's assistant messages: text before a tool call and after it, or an agent's several
# answers) are one message's text, each after a blank line so that Markdown reads it as a paragraph of its own. The
# break goes at the start of a later part's first delta: the message's text stays its deltas put together.
PART_BREAK = "\n\n"


def project_events(run: Run, events: list[tuple[str, dict]]) -> None:
    append_events(run.submission.conversation_id, run.submission_id, events)


@dataclass(frozen=True)
class Output:
    """What one read of the provider brought for one part of the reply: new text, and its whole text once done."""

    part_id: str
    delta: str
    completed_text: str | None = None


@dataclass(frozen=True)
class Progress:
    """What one read brought of a transient step of the agent's work (its reasoning summary so far): new text, and
    its whole text once the step ended."""

    step_id: str
    delta: str
    completed_text: str | None = None
    kind: str = "thinking"


def project_output(run: Run, outputs: list[Output | Progress]) -> None:
    """One run's projection, inside its fenced transaction (see `project_outputs`)."""
    project_outputs([(run, outputs)])


def project_outputs(projections: list[tuple[Run, list[Output | Progress]]]) -> None:
    """Appends each run's new text to its assistant message (one statement for all) and projects each delta and
    completion as its own event, in order (one statement for all); inside the transaction that fenced every run
    given."""
    append_to_messages(
        {
            run.submission.assistant_message_id: "".join(
                output.delta for output in outputs if isinstance(output, Output)
            )
            for run, outputs in projections
        }
    )
    with batched():
        for run, outputs in projections:
            project_events(run, output_events(run.submission.assistant_message_id, outputs))


def project_ending_output(run: Run, outputs: list[Output]) -> str:
    """The projection that goes with the run's end, inside its fenced transaction: its events, and its new text,
    returned for the end's own write of the message to append (`lifecycle.finish_in_transaction`): the message is
    written once, not twice."""
    message_id = run.submission.assistant_message_id
    with batched():
        project_events(run, output_events(message_id, outputs))
    return "".join(output.delta for output in outputs)


# Each assistant message's new text appended in one statement, for one run's projection or for a process's group.
_APPEND_TO_MESSAGES_SQL = """
UPDATE runtime_message message
SET text = message.text || appended.text, status = %(streaming)s::varchar, updated_at = now()
FROM unnest(%(ids)s::uuid[], %(texts)s::text[]) AS appended(id, text)
WHERE message.id = appended.id
"""


def append_to_messages(appended: dict) -> None:
    """{assistant message id: text to append}; a message given no text is left as it is."""
    appended = {message_id: text for message_id, text in appended.items() if text}
    if not appended:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            _APPEND_TO_MESSAGES_SQL,
            {"streaming": MessageStatus.STREAMING.value, "ids": list(appended), "texts": list(appended.values())},
        )


def output_events(message_id, outputs: list[Output | Progress]) -> list[tuple[str, dict]]:
    events = []
    for output in outputs:
        if isinstance(output, Progress):
            events.append((EventType.RUN_PROGRESS, _progress_payload(message_id, output)))
            continue
        if output.delta:
            events.append(
                (EventType.TEXT_DELTA, {"messageId": str(message_id), "partId": output.part_id, "delta": output.delta})
            )
        if output.completed_text is not None:
            events.append(
                (
                    EventType.MESSAGE_COMPLETED,
                    {"messageId": str(message_id), "partId": output.part_id, "text": output.completed_text},
                )
            )
    return events


def _progress_payload(message_id, progress: Progress) -> dict:
    """`run.progress`: a step's new text (`delta`, Markdown), and once it ended its whole `text` (docs/api.md)."""
    payload = {
        "messageId": str(message_id),
        "stepId": progress.step_id,
        "kind": progress.kind,
        "status": "running" if progress.completed_text is None else "completed",
        "delta": progress.delta,
    }
    if progress.completed_text is not None:
        payload["text"] = progress.completed_text
    return payload
