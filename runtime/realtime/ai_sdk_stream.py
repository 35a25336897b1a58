"""Projection of a submission's event log onto the Vercel AI SDK UI Message Stream (v1) chunks.

Pure and incremental: fed the persisted events in `seq` order, it yields the chunks that rebuild the
assistant message, so a fresh open replays the log and a live stream feeds each new event.

The files the user's message carries open the reply's stream as `data-instant-file` parts (from its
`submission.accepted`), the same parts history shows on the user message.

Long phases (the agent starting before any text, a tool running, a device's turn) are told as transient
`data-instant-step` chunks derived from the same events, so a client never looks idle while work happens. The
agent's reasoning summaries (`run.progress` events of kind `thinking`) are `reasoning` parts, which the AI SDK's
reader keeps in the message beside its text (never in it); a settled run whose progress was compacted has none.
Every ending — completed, failed, cancelled — closes with the final status and `finish`; only a broken
transport ends without it.

A call waiting for its owner's approval is told as the AI SDK (v6) tells it: a `tool-approval-request`
part (`approvalId` is what `POST /api/v1/tool-calls/{approvalId}/approval` answers), then, once answered,
the call's output, or `tool-output-denied` for a denial (the agent itself gets the denial as a tool error).
"""

from core.error_codes import ErrorCode
from runtime.models import RUN_END_EVENTS, EventType, RunState
from runtime.services.projection import PART_BREAK

STATUS_CHUNK = "data-instant-submission"
DEVICE_REQUEST_CHUNK = "data-instant-device-request"
STEP_CHUNK = "data-instant-step"

_STATUS_OF_EVENT = {
    EventType.SUBMISSION_ACCEPTED: "queued",
    EventType.RUN_STARTED: "running",
    EventType.RUN_PENDING_RECONCILIATION: RunState.PENDING_RECONCILIATION,
}


class UIMessageStream:
    def __init__(self, *, message_id: str, submission_id: str):
        self.message_id = message_id
        self.submission_id = submission_id
        self.open_text_parts: list[str] = []
        self.open_reasoning_parts: list[str] = []
        # What each reasoning part has said so far (its deltas, or the whole text its completion brought).
        self.reasoning_by_part: dict[str, str] = {}
        # What each part's deltas have said so far, so its completion can add what compaction removed.
        self.text_by_part: dict[str, str] = {}
        self.running_steps: dict[str, dict] = {}
        self.denied_calls: set[str] = set()
        self.files_shown = False
        self.finished = False

    def start(self) -> list[dict]:
        return [{"type": "start", "messageId": self.message_id}]

    def status(self, status: str) -> dict:
        return {
            "type": STATUS_CHUNK,
            "data": {"schemaVersion": 1, "submissionId": self.submission_id, "status": status},
        }

    def feed(self, event: dict) -> list[dict]:
        """The chunks one persisted event adds; nothing once the message has finished."""
        if self.finished:
            return []
        kind, payload = event["type"], event["payload"]
        return self._steps(kind, payload) + self._message_chunks(kind, payload)

    def _message_chunks(self, kind: str, payload: dict) -> list[dict]:
        if kind == EventType.TEXT_DELTA:
            return self._text_delta(payload["partId"], payload["delta"])
        if kind == EventType.MESSAGE_COMPLETED:
            return self._complete_text_part(payload["partId"], payload.get("text", ""))
        if kind == EventType.RUN_PROGRESS and payload["kind"] == "thinking":
            return self._reasoning(payload)
        if kind == EventType.TOOL_REQUESTED:
            return self._tool_requested(payload)
        if kind == EventType.TOOL_ACCEPTED:
            return [self.status(payload.get("status", "running"))]
        if kind == EventType.TOOL_APPROVAL_REQUESTED:
            return [
                {
                    "type": "tool-approval-request",
                    "approvalId": payload["approvalId"],
                    "toolCallId": payload["toolCallId"],
                },
                self.status("waiting_approval"),
            ]
        if kind == EventType.TOOL_APPROVAL_DECIDED:
            return self._approval_decided(payload)
        if kind == EventType.TOOL_COMPLETED:
            if payload["toolCallId"] in self.denied_calls:
                return []  # the denial was the call's outcome; its error receipt is for the agent
            if payload.get("error"):
                return [
                    {
                        "type": "tool-output-error",
                        "toolCallId": payload["toolCallId"],
                        "errorText": payload["error"]["message"],
                    }
                ]
            return [{"type": "tool-output-available", "toolCallId": payload["toolCallId"], "output": payload["output"]}]
        if kind == EventType.TOOL_UNCERTAIN:
            return [
                {
                    "type": "tool-output-error",
                    "toolCallId": payload["toolCallId"],
                    "errorText": payload.get("code", "uncertain"),
                }
            ]
        if kind == EventType.SUBMISSION_ACCEPTED:
            return self._files(payload) + [self.status(_STATUS_OF_EVENT[kind])]
        if kind in _STATUS_OF_EVENT:
            return [self.status(_STATUS_OF_EVENT[kind])]
        if kind == EventType.RUN_COMPLETED:
            return self._finish("completed")
        if kind == EventType.RUN_FAILED:
            error = payload.get("error") or {}
            return self._finish("failed", {"type": "error", "errorText": error.get("message", "The run failed.")})
        if kind == EventType.RUN_CANCELLED:
            return self._finish("cancelled", {"type": "abort"})
        return []

    def _files(self, payload: dict) -> list[dict]:
        """The files the user's message carries, each its `data-instant-file` part (as history's `parts` show
        them), once per stream: an acceptance again (a staff retry) names the same files."""
        if self.files_shown:
            return []
        self.files_shown = True
        return list(payload["userMessage"].get("parts", []))

    # --- steps ----------------------------------------------------------------------------------

    def _step(self, step_id: str, kind: str, title: str, status: str, **extra) -> dict:
        data = {"schemaVersion": 1, "kind": kind, "title": title, "status": status, **extra}
        if status == "running":
            self.running_steps[step_id] = {"kind": kind, "title": title}
        else:
            self.running_steps.pop(step_id, None)
        return {"type": STEP_CHUNK, "id": step_id, "data": data, "transient": True}

    def _steps(self, kind: str, payload: dict) -> list[dict]:
        """The step chunks an event opens or settles; the run's own step ends at its first visible output."""
        run_step = f"step-run-{self.submission_id}"
        if kind == EventType.RUN_STARTED:
            return [self._step(run_step, "run", "Starting the agent", "running")]
        chunks = []
        if run_step in self.running_steps and kind in _ENDS_RUN_STEP:
            chunks.append(self._step(run_step, "run", "Starting the agent", "completed"))
        if kind == EventType.TOOL_REQUESTED:
            chunks.append(self._tool_step_requested(payload))
        elif kind == EventType.TOOL_ACCEPTED:
            chunks.append(
                self._step(
                    _tool_step_id(payload),
                    "device",
                    f"Your device is running {payload['toolName']}",
                    "running",
                    detail="The device accepted the request.",
                )
            )
        elif kind in (EventType.TOOL_COMPLETED, EventType.TOOL_UNCERTAIN):
            chunks.extend(self._tool_step_settled(kind, payload))
        elif kind == EventType.TOOL_APPROVAL_REQUESTED:
            chunks.append(
                self._step(
                    _tool_step_id(payload),
                    "approval",
                    f"Waiting for your approval to run {payload['toolName']}",
                    "running",
                    detail=f"Unanswered by {payload['expiresAt']}, it is denied.",
                )
            )
        elif kind == EventType.TOOL_APPROVAL_DECIDED:
            chunks.append(self._approval_step_decided(payload))
        elif kind == EventType.RUN_SESSION_REPLACED:
            step_id = f"step-session-{self.submission_id}"
            detail = payload["message"]
            chunks.append(self._step(step_id, "session", "Started a new session", "completed", detail=detail))
        return chunks

    def _approval_step_decided(self, payload: dict) -> dict:
        step_id = _tool_step_id(payload)
        if payload["decision"] == "denied":
            title = f"Waiting for your approval to run {payload['toolName']}"
            return self._step(step_id, "approval", title, "failed", detail=_DENIAL_WORDS.get(payload["outcome"], ""))
        return self._tool_step_requested(payload)

    def _tool_step_requested(self, payload: dict) -> dict:
        device = payload.get("device")
        if device:
            return self._step(
                _tool_step_id(payload),
                "device",
                f"Waiting for your device to run {payload['toolName']}",
                "running",
                detail=f"The device has until {device['expiresAt']}.",
            )
        return self._step(_tool_step_id(payload), "tool", f"Running {payload['toolName']}", "running")

    def _tool_step_settled(self, kind: str, payload: dict) -> list[dict]:
        step_id = _tool_step_id(payload)
        opened = self.running_steps.get(step_id)
        if opened is None:
            return []  # settled on the spot (refused) or settled again by staff: nothing was shown running
        if kind == EventType.TOOL_UNCERTAIN:
            return [
                self._step(step_id, opened["kind"], opened["title"], "uncertain", detail=payload.get("message", ""))
            ]
        if payload.get("error"):
            return [
                self._step(
                    step_id, opened["kind"], opened["title"], "failed", detail=payload["error"].get("message", "")
                )
            ]
        return [self._step(step_id, opened["kind"], opened["title"], "completed", result=payload.get("output"))]

    def _text_delta(self, part_id: str, delta: str) -> list[dict]:
        if part_id not in self.text_by_part:
            delta = delta.removeprefix(PART_BREAK)  # a part of its own here: the break is for the message's text
        chunks = []
        if part_id not in self.open_text_parts:
            self.open_text_parts.append(part_id)
            chunks.append({"type": "text-start", "id": part_id})
        chunks.append({"type": "text-delta", "id": part_id, "delta": delta})
        self.text_by_part[part_id] = self.text_by_part.get(part_id, "") + delta
        return chunks

    def _complete_text_part(self, part_id: str, text: str) -> list[dict]:
        """Closes the part, first sending whatever of its whole text the deltas did not: all of it for a settled
        run whose deltas were compacted (docs/data-lifecycle.md), the rest of it for one compacted while followed."""
        said = self.text_by_part.get(part_id, "")
        missing = text[len(said) :] if text.startswith(said) else ""
        chunks = []
        if missing:
            chunks = self._text_delta(part_id, missing)
        if part_id not in self.open_text_parts:
            return chunks
        self.open_text_parts.remove(part_id)
        return [*chunks, {"type": "text-end", "id": part_id}]

    def _reasoning(self, payload: dict) -> list[dict]:
        """A reasoning part per step: opened by its first progress, ended by its completion (whose whole text
        adds whatever its deltas did not say)."""
        part_id = payload["stepId"]
        chunks = []
        if part_id not in self.reasoning_by_part:
            self.reasoning_by_part[part_id] = ""
            self.open_reasoning_parts.append(part_id)
            chunks.append({"type": "reasoning-start", "id": part_id})
        elif part_id not in self.open_reasoning_parts:
            return []  # ended already
        said = self.reasoning_by_part[part_id]
        delta = payload["delta"]
        if payload["status"] == "completed":
            whole = payload["text"]
            delta = whole[len(said) :] if whole.startswith(said) else ""
        if delta:
            self.reasoning_by_part[part_id] = said + delta
            chunks.append({"type": "reasoning-delta", "id": part_id, "delta": delta})
        if payload["status"] == "completed":
            self.open_reasoning_parts.remove(part_id)
            chunks.append({"type": "reasoning-end", "id": part_id})
        return chunks

    def _approval_decided(self, payload: dict) -> list[dict]:
        if payload["decision"] == "denied":
            self.denied_calls.add(payload["toolCallId"])
            return [{"type": "tool-output-denied", "toolCallId": payload["toolCallId"]}]
        chunks = [self.status("queued")]  # back in the queue; `run.started` says when a worker has it
        if payload["outcome"] == "edited":
            # The part shows what runs: the arguments its owner edited, not those the agent asked for.
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": payload["toolCallId"],
                    "toolName": payload["toolName"],
                    "input": payload["input"],
                }
            )
        return chunks + self._device_request(payload)

    def _device_request(self, payload: dict) -> list[dict]:
        device = payload.get("device")
        if not device:
            return []
        return [
            {"type": DEVICE_REQUEST_CHUNK, "data": {"schemaVersion": 1, "toolCallId": payload["toolCallId"], **device}}
        ]

    def _tool_requested(self, payload: dict) -> list[dict]:
        chunks = [
            {
                "type": "tool-input-available",
                "toolCallId": payload["toolCallId"],
                "toolName": payload["toolName"],
                "input": payload["input"],
            }
        ]
        return chunks + self._device_request(payload)

    def _finish(self, status: str, ending: dict | None = None) -> list[dict]:
        """Closes open text, then `error`|`abort` if the run did not complete, the final status and `finish`."""
        chunks = [{"type": "reasoning-end", "id": part_id} for part_id in self.open_reasoning_parts]
        chunks += [{"type": "text-end", "id": part_id} for part_id in self.open_text_parts]
        self.open_reasoning_parts = []
        self.open_text_parts = []
        self.finished = True
        return [*chunks, *([ending] if ending else []), self.status(status), {"type": "finish"}]


_ENDS_RUN_STEP = RUN_END_EVENTS | {
    EventType.TEXT_DELTA,
    EventType.MESSAGE_COMPLETED,
    EventType.RUN_PROGRESS,
    EventType.TOOL_REQUESTED,
    EventType.RUN_PENDING_RECONCILIATION,
}


_DENIAL_WORDS = {
    ErrorCode.APPROVAL_DENIED: "You denied it.",
    ErrorCode.APPROVAL_TIMEOUT: "Nobody answered in time: it was denied.",
    ErrorCode.RUN_CANCELLED: "The run was cancelled.",
}


def _tool_step_id(payload: dict) -> str:
    return f"step-tool-{payload['toolCallId']}"


def compact(chunks: list[dict]) -> list[dict]:
    """A reconstruction sends the text (and reasoning) so far at once, the latest status, and each step's latest
    state."""
    merged: list[dict] = []
    for chunk in chunks:
        previous = merged[-1] if merged else None
        if (
            chunk["type"] in ("text-delta", "reasoning-delta")
            and previous
            and previous["type"] == chunk["type"]
            and previous["id"] == chunk["id"]
        ):
            merged[-1] = {**previous, "delta": previous["delta"] + chunk["delta"]}
        elif chunk["type"] == STATUS_CHUNK:
            merged = [c for c in merged if c["type"] != STATUS_CHUNK] + [chunk]
        elif chunk["type"] == STEP_CHUNK:
            merged = [c for c in merged if not (c["type"] == STEP_CHUNK and c["id"] == chunk["id"])] + [chunk]
        else:
            merged.append(chunk)
    return merged
