"""What a running turn writes into the store: its start, reasoning, reply text, function calls and end.

The echo agent calls these from the turn's own thread; each one checks first that the turn still runs (a cancel or
a reset ends it elsewhere) and raises `TurnEnded` if not.
"""

from __future__ import annotations

from typing import Any

from rebyte.double import records
from rebyte.double.resources import Session, Turn, new_id, now
from rebyte.double.store import Store


class TurnProgress:
    def __init__(self, store: Store):
        self._store = store

    def _running(self, turn: Turn, *, allow_waiting: bool = False) -> Session:
        """The turn's session, once the turn is known to run; called with the store's lock held."""
        records.check_running(self._store.turns, turn, allow_waiting=allow_waiting)
        return self._store.sessions[turn.obj["session_id"]]

    def begin(self, turn: Turn) -> str:
        with self._store.cond:
            session = self._running(turn)
            turn.obj.update(status="in_progress", started_at=now())
            session.obj["status"] = "in_progress"
            records.emit(session, "agent.session.turn.in_progress", turn=turn)
            records.emit(session, "agent.session.in_progress")
            return turn.script

    def open_message(self, turn: Turn) -> str:
        with self._store.cond:
            session = self._running(turn)
            item = {
                "id": new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "phase": "final_answer",
                "content": [],
                "turn_id": turn.obj["id"],
            }
            records.add_item(self._store.items, session, item, done=False)
            return item["id"]

    def text_delta(self, turn: Turn, item_id: str, delta: str) -> None:
        with self._store.cond:
            session = self._running(turn)
            item = self._store.items[item_id]
            if not item["content"]:
                item["content"].append({"type": "output_text", "text": ""})
            item["content"][0]["text"] += delta
            records.emit(
                session,
                "agent.session.turn.output_text.delta",
                turn_id=turn.obj["id"],
                item_id=item_id,
                output_index=records.output_index(session, item_id),
                content_index=0,
                delta=delta,
            )

    def close_message(self, turn: Turn, item_id: str) -> None:
        with self._store.cond:
            session = self._running(turn)
            item = self._store.items[item_id]
            item["status"] = "completed"
            text = item["content"][0]["text"] if item["content"] else ""
            index = records.output_index(session, item_id)
            records.emit(
                session,
                "agent.session.turn.output_text.done",
                turn_id=turn.obj["id"],
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
            )
            records.emit(session, "agent.session.turn.item.done", item=item, output_index=index)

    def open_reasoning(self, turn: Turn) -> str | None:
        """A reasoning item with one empty summary part, or None when the agent reasons silently: the knob is off
        or the session's agent asked for no summaries (`reasoning.summary` null, as the real service does)."""
        with self._store.cond:
            session = self._running(turn)
            if not self._store.config.reasoning_summaries or session.obj["agent"]["reasoning"]["summary"] is None:
                return None
            item = {
                "id": new_id("rs"),
                "type": "reasoning",
                "status": "in_progress",
                "summary": [],
                "turn_id": turn.obj["id"],
            }
            records.add_item(self._store.items, session, item, done=False)
            item["summary"].append({"type": "summary_text", "text": ""})
            records.emit(
                session,
                "agent.session.turn.reasoning_summary_part.added",
                **_summary_fields(session, turn, item),
                part={"type": "summary_text", "text": ""},
            )
            return item["id"]

    def summary_delta(self, turn: Turn, item_id: str, delta: str) -> None:
        with self._store.cond:
            session = self._running(turn)
            item = self._store.items[item_id]
            item["summary"][0]["text"] += delta
            records.emit(
                session,
                "agent.session.turn.reasoning_summary_text.delta",
                **_summary_fields(session, turn, item),
                delta=delta,
            )

    def close_reasoning(self, turn: Turn, item_id: str) -> None:
        with self._store.cond:
            session = self._running(turn)
            item = self._store.items[item_id]
            part = dict(item["summary"][0])
            fields = _summary_fields(session, turn, item)
            records.emit(session, "agent.session.turn.reasoning_summary_text.done", **fields, text=part["text"])
            records.emit(session, "agent.session.turn.reasoning_summary_part.done", **fields, part=part)
            item["status"] = "completed"
            records.emit(session, "agent.session.turn.item.done", item=item, output_index=fields["output_index"])

    def call_functions(self, turn: Turn, calls: list[tuple[str, dict]]) -> list[tuple[str, dict[str, Any]]]:
        """Emits the function calls, waits until each has a result, and returns (name, result) in order."""
        with self._store.cond:
            session = self._running(turn)
            call_ids = [self._call(session, turn, name, arguments) for name, arguments in calls]
            turn.obj["status"] = "waiting"
            session.obj["status"] = "requires_action"
            session.obj["required_actions"] = [
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": name,
                    "arguments": turn.pending_calls[call_id][1],
                    "turn_id": turn.obj["id"],
                }
                for call_id, name in call_ids
            ]
            records.emit(session, "agent.session.requires_action")
            while True:
                self._running(turn, allow_waiting=True)
                if turn.obj["status"] == "in_progress":
                    return [(name, turn.answers[call_id]) for call_id, name in call_ids]
                self._store.cond.wait()

    def _call(self, session: Session, turn: Turn, name: str, arguments: dict) -> tuple[str, str]:
        call_id = new_id("call")
        turn.pending_calls[call_id] = (name, arguments)
        records.add_item(
            self._store.items,
            session,
            {
                "id": new_id("fc"),
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
                "status": "completed",
                "turn_id": turn.obj["id"],
            },
            done=True,
        )
        return call_id, name

    def fail(self, turn: Turn, code: str, message: str) -> None:
        self._finish(turn, "failed", {"code": code, "message": message})

    def complete(self, turn: Turn) -> None:
        self._finish(turn, "completed")

    def _finish(self, turn: Turn, status: str, error: dict | None = None) -> None:
        with self._store.cond:
            session = self._running(turn)
            records.finish_turn(self._store.items, session, turn, status, error)
            self._store.cond.notify_all()

    def cut_live_streams(self, turn: Turn) -> None:
        with self._store.cond:
            for subscriber in self._store.sessions[turn.obj["session_id"]].subscribers:
                subscriber.put(None)


def _summary_fields(session: Session, turn: Turn, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "turn_id": turn.obj["id"],
        "item_id": item["id"],
        "output_index": records.output_index(session, item["id"]),
        "summary_index": len(item["summary"]) - 1,
    }
