"""The chaos run's approvals decided from the notification (docs/notifications.md "Approve or deny from the
notification"), as the service worker does: the approval's push, as the suite's push service decrypted it for the
user's browser, carries Approve and Deny, each with a capability minted for that push attempt; the worker posts one to
`POST /api/v1/approvals/decide` with no session, sent again through an outage with the same body. A person then
sometimes taps the same action again, or the other one (on another copy of the push): each must be refused."""

import random
from typing import TYPE_CHECKING

import httpx

from devtools.records import CapabilityAnswer, Command, ConversationRecord
from devtools.stack import wait_until
from tests.chaos.branches import ENDED_STATES
from tests.chaos.clients import CLIENT_RETRY_SECONDS, request

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

# The tool the run's stack asks approval for (IMPO_TOOL_APPROVAL); it only reads the clock, so the notes the other
# tool commands save stay as the tool invariants expect.
APPROVED_TOOL = "current_time"
APPROVAL_ENV = {"IMPO_TOOL_APPROVAL": f"play_sound=never,{APPROVED_TOOL}=always,save_note=always"}
REPLAYED = 0.4  # how often a person taps again, or taps the other action, after the first answer


def approval_text() -> str:
    return f"/tool {APPROVED_TOOL} {{}}"


def decide(run: "ChaosRun", rng: random.Random, record: ConversationRecord, command: Command) -> None:
    """Waits for the approval push of the command's reply (or the run's end without one: a provider fault failed it
    first) and decides it by a capability of one of its copies; sets the reply's expected start."""
    pushes = approval_pushes(run, record, command)
    if not pushes:
        return
    decision = rng.choice(["approve", "deny"])
    push = rng.choice(pushes)
    approval_id = push.payload["toolCallId"]
    status, body = _post(run, approval_id, decision, _token(push, decision))
    if status == 200 and body.get("status") != ("approved" if decision == "approve" else "denied"):
        record.errors.append(f"approval {approval_id}: {decision} acknowledged as {body}")
    if status not in (200, 409):
        record.errors.append(f"approval {approval_id}: decide {decision} answered {status}: {body}")
        return
    # 409 `capability_used` here: an attempt whose answer was lost spent it; the decision is ours all the same.
    answer = CapabilityAnswer(record.user, approval_id, record.conversation_id, decision, acknowledged=status == 200)
    run.capability_answers.append(answer)
    run.figures.commands_by_kind["approval_decide"] += 1
    verdict = "returned" if decision == "approve" else "failed"
    command.reply_prefix = f"Tool {APPROVED_TOOL} {verdict}: "
    while rng.random() < REPLAYED:
        again = rng.choice(["approve", "deny"])
        status, body = _post(run, approval_id, again, _token(rng.choice(pushes), again))
        if (status, body.get("error", {}).get("code")) != (409, "capability_used"):
            record.errors.append(f"approval {approval_id}: a second {again} answered {status}: {body}")
        answer.refused_after += 1


def approval_pushes(run: "ChaosRun", record: ConversationRecord, command: Command) -> list:
    """Every copy of the approval push of the command's reply that the user's browser received with its actions,
    once one has; empty when the run ended without asking (or was decided otherwise: no push then offers a
    decision)."""

    def pushed_or_ended():
        pushes = [
            push
            for push in list(run.push_service.accepted)
            if push.payload.get("messageId") == command.reply_message_id and push.payload.get("actions")
        ]
        if pushes:
            return pushes
        with httpx.Client(
            base_url=run.web_url, headers={"Authorization": f"Bearer {record.user.token}"}, timeout=20
        ) as http:
            response = request(http, "GET", f"/api/v1/submissions/{command.submission_id}")
        return ["ended"] if response.status_code == 200 and response.json()["status"] in ENDED_STATES else None

    found = wait_until(pushed_or_ended, timeout=CLIENT_RETRY_SECONDS, interval=0.3, what="the approval push")
    return [] if found == ["ended"] else found


def _token(push, decision: str) -> str:
    return next(action["capability"] for action in push.payload["actions"] if action["action"] == decision)


def _post(run: "ChaosRun", approval_id: str, decision: str, capability: str) -> tuple[int, dict]:
    """The service worker's request: no session, no token; the capability is the authority."""
    body = {"approvalId": approval_id, "decision": decision, "capability": capability}
    with httpx.Client(base_url=run.web_url, timeout=20) as worker:
        response = request(worker, "POST", "/api/v1/approvals/decide", body)
    return response.status_code, response.json()
