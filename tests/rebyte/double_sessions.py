"""What the double's tests share about a session: the function tool it declares, creating it with its first
message, waiting for its turns to settle and reading its event stream."""

import uuid

from devtools.stack import wait_until

CURRENT_TIME = {
    "type": "function",
    "name": "current_time",
    "description": "The current time.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
}


def read_until_idle(stream, into: list) -> None:
    """Appends the stream's events to `into` up to the session's idle after a turn, then closes the stream (the
    server never ends it). Run in a thread when the test must send while the stream is open."""
    try:
        for event in stream:
            into.append(event)
            if event.type == "agent.session.idle":
                return
    finally:
        stream.close()


def user_input(text: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "input_text", "text": text}]}]


def new_session(sdk, text="hello", tools=(CURRENT_TIME,), metadata=None):
    agent = sdk.beta.agents.create(model="rebyte-echo", name="test", metadata={"k": uuid.uuid4().hex})
    return sdk.beta.agents.sessions.create(
        environment={"type": "none"},
        agent_id=agent.id,
        agent={"tools": list(tools)},
        input=user_input(text),
        metadata=metadata or {},
    )


def turns_of(sdk, session_id):
    return list(sdk.beta.agents.sessions.turns.list(session_id, order="asc", limit=100))


def settled_turns(sdk, session_id, count=1):
    def done():
        turns = turns_of(sdk, session_id)
        finished = [t for t in turns if t.status in ("completed", "failed", "cancelled")]
        return turns if len(turns) >= count and len(finished) == len(turns) else None

    return wait_until(done, timeout=20, what=f"{count} settled turns of {session_id}")
