"""The double's deterministic agent, one thread per turn, independent of any client stream.

It reads the last `input_text` part of the turn's input (earlier parts carry context) and, after trimming:
- `/tool NAME [JSON object]` on every non-blank line: calls those functions (declared in the session's tools),
  waits for every result, then replies `Tool NAME returned: OUTPUT` (or `Tool NAME failed: ERROR`), one line each;
- `/fail [message]`: the turn fails with code `internal_error` (the agent's own failure);
- `/busy [message]`: the turn fails with code `server_overloaded` (a passing one; a real SessionTurnError code);
- `/blocks`: two assistant messages, in Mandarin and with emoji;
- `/slow T`: echoes T one character per delta, ten times slower than the configured pacing;
- `/broken T`: echoes T, but cuts every live stream of the session after the first delta;
- anything else T: replies `Echo: T` (the input exactly as sent).

With `reasoning_summaries` on (`/_double/config`) and a session whose agent asks for summaries, every turn first
reasons: a `reasoning` item whose one summary part streams at the configured pacing (`reasoning_summary`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time

from rebyte.double.progress import TurnProgress
from rebyte.double.resources import Turn, TurnEnded
from rebyte.double.store import Store

logger = logging.getLogger(__name__)

TWO_BLOCKS = ("你好！这是第一段回答 🌏", "第二段：Emoji 🎉 与中文混排，一切正常 ✅")


class ScriptError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def tool_requests(script: str, declared: set[str]) -> list[tuple[str, dict]]:
    """The function calls a `/tool` script asks for; empty when the input is not a tool script."""
    lines = [line.strip() for line in script.splitlines() if line.strip()]
    if not lines or not all(line == "/tool" or line.startswith("/tool ") for line in lines):
        return []
    requests = []
    for line in lines:
        name, _, raw = line.removeprefix("/tool").strip().partition(" ")
        if not name:
            raise ScriptError("usage: /tool NAME [JSON object]")
        if name not in declared:
            raise ScriptError(f"Tool {name!r} is not among the session's tools")
        try:
            arguments = json.loads(raw.strip() or "{}")
        except json.JSONDecodeError as exc:
            raise ScriptError(f"Arguments for {name} are not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise ScriptError(f"Arguments for {name} must be a JSON object")
        requests.append((name, arguments))
    return requests


def chunks(text: str, count: int) -> list[str]:
    size = max(1, math.ceil(len(text) / count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def reasoning_summary(script: str) -> str:
    """What the echo agent says it thought, in the shape reasoning models give: a bold title, then a sentence."""
    shown = script if len(script) <= 60 else f"{script[:57]}..."
    return f"**Reading the message**\n\nThe message says “{shown}”; I will answer it as the script asks."


class EchoAgent:
    def __init__(self, store: Store):
        self._store = store
        self._progress = TurnProgress(store)

    def start(self, turn: Turn) -> None:
        threading.Thread(target=self._run, args=(turn,), name=f"turn-{turn.obj['id']}", daemon=True).start()

    def _run(self, turn: Turn) -> None:
        progress = self._progress
        try:
            script = progress.begin(turn).strip()
            self._reason(turn, script)
            if script == "/fail" or script.startswith("/fail "):
                progress.fail(turn, "internal_error", script.removeprefix("/fail").strip() or "Asked to fail")
                return
            if script == "/busy" or script.startswith("/busy "):
                progress.fail(turn, "server_overloaded", script.removeprefix("/busy").strip() or "Asked to be busy")
                return
            if script == "/blocks":
                for block in TWO_BLOCKS:
                    self._say(turn, block)
            elif script.startswith("/slow "):
                delay, _ = self._store.pacing()
                self._say(turn, f"Echo: {script.removeprefix('/slow ')}", delay=delay * 10, per_character=True)
            elif script.startswith("/broken "):
                self._say(turn, f"Echo: {script.removeprefix('/broken ')}", cut_after_first=True)
            else:
                self._answer(turn, script)
            progress.complete(turn)
        except TurnEnded:
            logger.debug("turn %s ended while running", turn.obj["id"])

    def _answer(self, turn: Turn, script: str) -> None:
        session = self._store.sessions[turn.obj["session_id"]]
        try:
            requests = tool_requests(script, {tool["name"] for tool in session.tools})
        except ScriptError as exc:
            self._say(turn, f"I could not call that tool: {exc.message}")
            return
        if not requests:
            self._say(turn, f"Echo: {turn.script}")
            return
        results = self._progress.call_functions(turn, requests)
        lines = []
        for name, result in results:
            if result["success"]:
                output = result["output"] if isinstance(result["output"], str) else json.dumps(result["output"])
                lines.append(f"Tool {name} returned: {output}")
            else:
                lines.append(f"Tool {name} failed: {result['error']}")
        self._say(turn, "\n".join(lines))

    def _reason(self, turn: Turn, script: str) -> None:
        item_id = self._progress.open_reasoning(turn)
        if item_id is None:
            return
        delay, count = self._store.pacing()
        for piece in chunks(reasoning_summary(script), count):
            time.sleep(delay)
            self._progress.summary_delta(turn, item_id, piece)
        self._progress.close_reasoning(turn, item_id)

    def _say(self, turn: Turn, text: str, *, delay=None, per_character=False, cut_after_first=False) -> None:
        configured_delay, count = self._store.pacing()
        delay = configured_delay if delay is None else delay
        pieces = list(text) if per_character else chunks(text, count)
        item_id = self._progress.open_message(turn)
        for index, piece in enumerate(pieces):
            time.sleep(delay)
            self._progress.text_delta(turn, item_id, piece)
            if cut_after_first and index == 0:
                self._progress.cut_live_streams(turn)
        self._progress.close_message(turn, item_id)
