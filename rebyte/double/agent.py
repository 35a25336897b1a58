"""The double's deterministic agent.

Input scripts (after stripping surrounding whitespace):
- every non-blank line is `/tool NAME [JSON object]`: call those functions (declared in the turn's tools) in
  one step, wait in requires_action for all outputs, then reply `Tool NAME returned: OUTPUT`, one line each;
- `/fail [message]`: the turn fails with code `agent_error`;
- anything else T: reply `Echo: T`.
Replies are streamed as several text deltas, paced by the store's config.

Each turn runs in its own thread, independent of any client stream, as on a managed provider.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass

from rebyte.double.state import Store, TurnEnded, new_id

logger = logging.getLogger(__name__)


class ScriptError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ToolRequest:
    name: str
    arguments: str  # JSON text, as function_call items carry it


def tool_requests(text: str, declared: set[str]) -> list[ToolRequest]:
    """The function calls a `/tool` script asks for; empty when the input is not a tool script."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or not all(line == "/tool" or line.startswith("/tool ") for line in lines):
        return []
    requests = []
    for line in lines:
        name, _, raw = line.removeprefix("/tool").strip().partition(" ")
        if not name:
            raise ScriptError("invalid_tool_command", "usage: /tool NAME [JSON object]")
        if name not in declared:
            raise ScriptError("unknown_tool", f"Tool {name!r} is not among the turn's tools")
        try:
            arguments = json.loads(raw.strip() or "{}")
        except json.JSONDecodeError as exc:
            raise ScriptError("invalid_tool_arguments", f"Arguments for {name} are not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise ScriptError("invalid_tool_arguments", f"Arguments for {name} must be a JSON object")
        requests.append(ToolRequest(name, json.dumps(arguments)))
    return requests


def chunks(text: str, count: int) -> list[str]:
    size = max(1, math.ceil(len(text) / count))
    return [text[i : i + size] for i in range(0, len(text), size)]


class EchoAgent:
    def __init__(self, store: Store):
        self._store = store

    def start(self, turn_id: str) -> None:
        threading.Thread(target=self._run, args=(turn_id,), name=f"turn-{turn_id}", daemon=True).start()

    def _run(self, turn_id: str) -> None:
        store = self._store
        try:
            turn = store.start_turn(turn_id)
            text = turn.input_text.strip()
            if text == "/fail" or text.startswith("/fail "):
                store.fail_turn(turn_id, "agent_error", text.removeprefix("/fail").strip() or "Asked to fail")
                return
            try:
                requests = tool_requests(text, {tool["name"] for tool in turn.tools})
            except ScriptError as exc:
                store.fail_turn(turn_id, exc.code, exc.message)
                return
            if requests:
                outputs = store.request_function_calls(turn_id, [(r.name, r.arguments) for r in requests])
                reply = "\n".join(f"Tool {name} returned: {output}" for name, output in outputs)
            else:
                reply = f"Echo: {turn.input_text}"
            self._say(turn_id, reply)
            store.complete_turn(turn_id)
        except TurnEnded:
            logger.debug("turn %s ended while running", turn_id)

    def _say(self, turn_id: str, text: str) -> None:
        delay, count = self._store.pacing()
        item_id = new_id("msg")
        for piece in chunks(text, count):
            time.sleep(delay)
            self._store.text_delta(turn_id, item_id, piece)
        self._store.complete_message(turn_id, item_id)
