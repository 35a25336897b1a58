"""How a session's record is written: turns started and ended, items added, and each change fanned out at once to
the session's live streams. The caller holds the store's lock and wakes its waiters."""

from __future__ import annotations

from typing import Any

from rebyte.double import content
from rebyte.double.resources import (
    TERMINAL_TURN_STATUSES,
    Session,
    Turn,
    TurnEnded,
    new_id,
    now,
    turn_object,
    usage,
    wire_copy,
)

Turns = dict[str, Turn]
Items = dict[str, dict[str, Any]]


def emit(session: Session, event_type: str, *, turn: Turn | None = None, **fields) -> None:
    """Fans an event out to the session's live streams; nothing is kept for later (no replay)."""
    event: dict[str, Any] = {"type": event_type, "event_id": new_id("evt")}
    if event_type.startswith("agent.session.turn."):
        event["session_id"] = session.obj["id"]
        if turn is not None:
            event["turn"] = wire_copy(turn.obj)
            event["turn_id"] = turn.obj["id"]
        if "item" in fields:
            fields["item"] = wire_copy(fields["item"])
            event["turn_id"] = fields["item"].get("turn_id")
        event.update(fields)
    else:
        event["session"] = wire_copy(session.obj)
    for subscriber in session.subscribers:
        subscriber.put(event)


def active_turn(turns: Turns, session: Session) -> Turn | None:
    for turn_id in session.turn_ids:
        turn = turns[turn_id]
        if turn.obj["status"] not in TERMINAL_TURN_STATUSES:
            return turn
    return None


def check_running(turns: Turns, turn: Turn, *, allow_waiting: bool = False) -> None:
    if turn.obj["status"] in TERMINAL_TURN_STATUSES or (turn.obj["status"] == "waiting" and not allow_waiting):
        raise TurnEnded(turn.obj["id"])
    if turn.obj["id"] not in turns:  # reset
        raise TurnEnded(turn.obj["id"])


def start_turn(turns: Turns, items: Items, session: Session, input_messages, script: str) -> Turn:
    turn = Turn(obj=turn_object(session), script=script)
    turns[turn.obj["id"]] = turn
    session.turn_ids.append(turn.obj["id"])
    session.obj["last_active_at"] = turn.obj["created_at"]
    emit(session, "agent.session.turn.created", turn=turn)
    add_user_items(items, session, turn, input_messages)
    return turn


def add_user_items(items: Items, session: Session, turn: Turn, input_messages) -> None:
    if isinstance(input_messages, str):
        input_messages = [{"role": "user", "content": [{"type": "input_text", "text": input_messages}]}]
    for message in input_messages:
        add_item(
            items,
            session,
            {
                "id": new_id("msg"),
                "type": "message",
                "role": "user",
                "status": "completed",
                "phase": None,
                "content": [content.user_item_part(part) for part in message["content"]],
                "turn_id": turn.obj["id"],
            },
            done=False,
        )


def add_item(items: Items, session: Session, item: dict[str, Any], *, done: bool) -> None:
    items[item["id"]] = item
    session.item_ids.append(item["id"])
    index = len(session.item_ids) - 1
    emit(session, "agent.session.turn.item.added", item=item, output_index=index)
    if done:
        emit(session, "agent.session.turn.item.done", item=item, output_index=index)


def output_index(session: Session, item_id: str) -> int:
    return session.item_ids.index(item_id)


def answer_call(items: Items, session: Session, turn: Turn, event: dict[str, Any]) -> None:
    """Records a tool result for a call the turn waits for; the turn runs on once every call has its answer."""
    call_id = event["call_id"]
    answer = {"success": event["success"], "output": event.get("output"), "error": event.get("error")}
    turn.answers[call_id] = answer
    del turn.pending_calls[call_id]
    add_item(
        items,
        session,
        {
            "id": new_id("fco"),
            "type": "function_call_output",
            "call_id": call_id,
            "output": answer["output"] if answer["success"] else None,
            "error": None if answer["success"] else answer["error"],
            "status": "completed" if answer["success"] else "failed",
            "turn_id": turn.obj["id"],
        },
        done=False,
    )
    session.obj["required_actions"] = [a for a in session.obj["required_actions"] if a.get("call_id") != call_id]
    if not turn.pending_calls:
        turn.obj["status"] = "in_progress"
        session.obj["status"] = "in_progress"
        emit(session, "agent.session.turn.in_progress", turn=turn)
        emit(session, "agent.session.in_progress")


def finish_turn(items: Items, session: Session, turn: Turn, status: str, error: dict | None = None) -> None:
    turn.obj.update(status=status, completed_at=now(), error=error, usage=usage())
    turn.pending_calls.clear()
    for item_id in session.item_ids:
        item = items[item_id]
        if item.get("turn_id") == turn.obj["id"] and item["status"] == "in_progress":
            item["status"] = "incomplete"
    session.obj.update(status="idle", required_actions=[], last_active_at=now())
    emit(session, f"agent.session.turn.{status}", turn=turn, usage=usage())
    emit(session, "agent.session.idle")
