"""The chaos run's edits and ratings, as a person makes them in the web chat: the last message edited (sometimes
while its reply still runs: refused with 409 `run_in_progress`, saved again once the reply has ended), and a reply's
thumbs changed a few times. Each request goes again through an outage with the same body, as the chat's does."""

import random
import uuid
from typing import TYPE_CHECKING

import httpx

from devtools.records import Command, ConversationRecord, Rating
from devtools.stack import wait_until
from tests.chaos.clients import WORDS, accepted, request

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

# A reply is edited over, rated or regenerated only once it has ended (docs/api.md "Edit", "Regenerate").
ENDED_STATES = {"completed", "failed", "cancelled"}
# How often a refused edit is saved again after its reply ends; a reply parked for reconciliation may not end soon.
EDIT_SAVES, ENDED_WAIT_SECONDS = 3, 120


def edit(run: "ChaosRun", http: httpx.Client, rng: random.Random, edited: Command, index: int) -> Command | None:
    """The user message of the last exchange (`edited`'s) given new words: the accepted edit as a command, or None
    when its reply never ended in time. A lost 202 is sent again, the same body: the same receipt must answer."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
    body = {"clientMessageId": str(uuid.uuid4()), "text": f"chaos {index}.edit-{uuid.uuid4().hex[:6]} {words}"}
    path = f"/api/v1/messages/{edited.user_message_id}/edit"
    for _ in range(EDIT_SAVES):
        response = request(http, "POST", path, body)
        if response.status_code == 202:
            break
        if response.status_code != 409 or response.json()["error"]["code"] != "run_in_progress":
            raise AssertionError(f"POST {path} {body} answered {response.status_code}: {response.text}")
        run.figures.commands_by_kind["edit_refused_while_running"] += 1
        if not _ended(http, edited.submission_id):
            return None
    else:
        return None
    receipt = response.json()
    command = Command(
        body["clientMessageId"],
        body["text"],
        receipt["submissionId"],
        user_message_id=receipt["userMessageId"],
        reply_message_id=receipt["replyMessageId"],
        edits=edited.user_message_id,
        edited_text=edited.text,
    )
    command.file_notes = edited.file_notes  # an edit keeps the files of the version it edits
    run.figures.commands_by_kind["edit"] += 1
    if rng.random() < 0.3:
        run.faults.count("client_resend")
        if accepted(http, "POST", path, body)["submissionId"] != command.submission_id:
            raise AssertionError(f"resent edit {body['clientMessageId']} got another submission")
    return command


def _ended(http: httpx.Client, submission_id: str) -> bool:
    """Waits, as a person would, for the reply to end (completed, failed, cancelled); False when it did not."""

    def ended():
        response = request(http, "GET", f"/api/v1/submissions/{submission_id}")
        return response.status_code == 200 and response.json()["status"] in ENDED_STATES

    try:
        wait_until(ended, timeout=ENDED_WAIT_SECONDS, interval=0.2, what=f"submission {submission_id} to end")
    except TimeoutError:
        return False
    return True


def rate(run: "ChaosRun", http: httpx.Client, rng: random.Random, record: ConversationRecord, command: Command) -> None:
    """Thumbs up, down, or taken back, one to four times in a row on the command's reply; the last acknowledged
    rating is kept for the invariant."""
    path = f"/api/v1/messages/{command.reply_message_id}/feedback"
    for _ in range(rng.randint(1, 4)):
        rating = rng.choice(["up", "down", None])
        answer = accepted(http, "PUT", path, {"rating": rating}, status=200)
        if answer != {"messageId": command.reply_message_id, "feedback": rating}:
            raise AssertionError(f"PUT {path} {rating!r} answered {answer}")
        run.figures.commands_by_kind["feedback"] += 1
    run.ratings[command.reply_message_id] = Rating(
        record.user, command.reply_message_id, record.conversation_id, rating
    )
