"""The CPU of the pieces a worker is made of and cannot make cheaper itself, measured in this process on the same
machine and in the same run as the figures they bound (bench/inflight.py):

- one push through the project's channel layer, as a worker sends a projection's events to a conversation's
  sockets (`runtime.outbound`): groups of one member, each message a text.delta event, side by side one
  `group_send` per conversation and one `send_to_groups` call for the conversations of one write;
- one call through the gateway as shipped (the `openai` SDK): a read of a session's items at the double;
- one live event read through the SDK's stream (measured by whoever reads one: see `ThreadCpu`).

Each is CPU of the calling thread only (the bench runs other threads), per piece, in ms.
"""

import asyncio
import time
import uuid

CHANNEL_CAPACITY = 50  # of the 100 a channel holds: what is sent is received (untimed) before more is sent


def push_cpu_ms(conversations: int = 1, *, together: bool = False, messages: int = 500) -> float:
    """CPU of the sending thread per conversation pushed: `conversations` groups of one member each, pushed one
    `group_send` each (as before the group commit's push was one call), or all in one `send_to_groups` call (a
    process's group commit now: one call for the conversations of one write)."""
    from channels.layers import get_channel_layer

    def event() -> dict:
        return {
            "type": "text.delta",
            "seq": 1,
            "payload": {"messageId": str(uuid.uuid4()), "partId": f"text-{uuid.uuid4().hex}", "delta": "x" * 10},
        }

    async def pushes() -> float:
        layer = get_channel_layer()
        # The receiving channels are one process's, as a web process's sockets are: they share one Redis key.
        channels = [await layer.new_channel() for _ in range(conversations)]
        groups = [f"bench-floor-{uuid.uuid4().hex}" for _ in channels]
        for group, channel in zip(groups, channels, strict=True):
            await layer.group_add(group, channel)
        sends_per_batch = max(1, CHANNEL_CAPACITY // conversations)
        spent, sent = 0.0, 0
        try:
            while sent < messages:
                started = time.thread_time()
                for _ in range(sends_per_batch):
                    messages_of = {group: {"type": "conversation.events", "events": [event()]} for group in groups}
                    if together:
                        await layer.send_to_groups(messages_of)
                    else:
                        for group, message in messages_of.items():
                            await layer.group_send(group, message)
                spent += time.thread_time() - started
                for _ in range(sends_per_batch):
                    for channel in channels:
                        await layer.receive(channel)
                sent += sends_per_batch * conversations
        finally:
            for group, channel in zip(groups, channels, strict=True):
                await layer.group_discard(group, channel)
        return spent / sent

    return 1000 * asyncio.run(pushes())


def push_alternatives() -> dict[str, float]:
    """The push's CPU per conversation, side by side (ms): one group_send per conversation, and one call for the
    conversations of a write as the group commit carries them (10 and 50 at once)."""
    return {
        "one group_send per conversation": push_cpu_ms(),
        "one call for 1 conversation": push_cpu_ms(together=True),
        "one call for 10 conversations": push_cpu_ms(10, together=True),
        "one call for 50 conversations": push_cpu_ms(50, together=True),
    }


def sdk_call_cpu_ms(stack, owner, calls: int = 100) -> float:
    """A read of the items of `owner`'s current session, through a gateway to the stack's double."""
    from rebyte.models import RemoteSession

    session = RemoteSession.objects.get(conversation__owner=owner, state="current")
    with stack.double.gateway() as gateway:
        gateway.list_items(session.remote_id)  # the connection opened, the SDK's resources loaded
        started = time.thread_time()
        for _ in range(calls):
            gateway.list_items(session.remote_id)
        return 1000 * (time.thread_time() - started) / calls


class ThreadCpu:
    """The CPU a thread spends on a count of pieces: `start()` and `stop()` are called on that thread."""

    def __init__(self):
        self.seconds = 0.0
        self.pieces = 0
        self._started = 0.0

    def start(self) -> None:
        self._started = time.thread_time()

    def stop(self, pieces: int) -> None:
        self.seconds += time.thread_time() - self._started
        self.pieces += pieces

    @staticmethod
    def per_piece_ms(measured: list["ThreadCpu"]) -> float:
        pieces = sum(cpu.pieces for cpu in measured)
        return 1000 * sum(cpu.seconds for cpu in measured) / pieces if pieces else float("nan")
