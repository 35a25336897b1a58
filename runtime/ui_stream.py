"""Projection of a submission's event log onto the Vercel AI SDK UI Message Stream (v1) chunks.

Pure and incremental: fed the persisted events in `seq` order, it yields the chunks that rebuild the
assistant message, so a fresh open replays the log and a live stream feeds each new event.
"""

from runtime.models import EventType

STATUS_CHUNK = "data-instant-submission"
DEVICE_REQUEST_CHUNK = "data-instant-device-request"

_STATUS_OF_EVENT = {
    EventType.SUBMISSION_ACCEPTED: "queued",
    EventType.RUN_STARTED: "running",
    EventType.RUN_PENDING_RECONCILIATION: "pending_reconciliation",
}


class UIMessageStream:
    def __init__(self, *, message_id: str, submission_id: str):
        self.message_id = message_id
        self.submission_id = submission_id
        self.open_text_parts: list[str] = []
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
        if kind == EventType.TEXT_DELTA:
            return self._text_delta(payload["partId"], payload["delta"])
        if kind == EventType.MESSAGE_COMPLETED:
            return self._close_text_part(payload["partId"])
        if kind == EventType.TOOL_REQUESTED:
            return self._tool_requested(payload)
        if kind == EventType.TOOL_ACCEPTED:
            return [self.status(payload.get("status", "running"))]
        if kind == EventType.TOOL_COMPLETED:
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
        if kind in _STATUS_OF_EVENT:
            return [self.status(_STATUS_OF_EVENT[kind])]
        if kind == EventType.RUN_COMPLETED:
            return self._finish("completed", {"type": "finish"})
        if kind == EventType.RUN_FAILED:
            error = payload.get("error") or {}
            return self._finish("failed", {"type": "error", "errorText": error.get("message", "The run failed.")})
        if kind == EventType.RUN_CANCELLED:
            return self._finish("cancelled", {"type": "abort"})
        return []

    def _text_delta(self, part_id: str, delta: str) -> list[dict]:
        chunks = []
        if part_id not in self.open_text_parts:
            self.open_text_parts.append(part_id)
            chunks.append({"type": "text-start", "id": part_id})
        chunks.append({"type": "text-delta", "id": part_id, "delta": delta})
        return chunks

    def _close_text_part(self, part_id: str) -> list[dict]:
        if part_id not in self.open_text_parts:
            return []
        self.open_text_parts.remove(part_id)
        return [{"type": "text-end", "id": part_id}]

    def _tool_requested(self, payload: dict) -> list[dict]:
        chunks = [
            {
                "type": "tool-input-available",
                "toolCallId": payload["toolCallId"],
                "toolName": payload["toolName"],
                "input": payload["input"],
            }
        ]
        device = payload.get("device")
        if device:
            chunks.append(
                {
                    "type": DEVICE_REQUEST_CHUNK,
                    "data": {"schemaVersion": 1, "toolCallId": payload["toolCallId"], **device},
                }
            )
        return chunks

    def _finish(self, status: str, last: dict) -> list[dict]:
        chunks = [{"type": "text-end", "id": part_id} for part_id in self.open_text_parts]
        self.open_text_parts = []
        self.finished = True
        return [*chunks, self.status(status), last]


def compact(chunks: list[dict]) -> list[dict]:
    """Merges runs of deltas of one text part: a reconstruction sends the text so far at once."""
    merged: list[dict] = []
    for chunk in chunks:
        previous = merged[-1] if merged else None
        if (
            chunk["type"] == "text-delta"
            and previous
            and previous["type"] == "text-delta"
            and previous["id"] == chunk["id"]
        ):
            merged[-1] = {**previous, "delta": previous["delta"] + chunk["delta"]}
        elif chunk["type"] == STATUS_CHUNK:
            merged = [c for c in merged if c["type"] != STATUS_CHUNK] + [chunk]
        else:
            merged.append(chunk)
    return merged
