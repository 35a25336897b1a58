"""The CPU of the pieces a worker is made of and cannot make cheaper itself, measured in this process on the same
machine and in the same run as the figures they bound (bench/inflight.py):

- one push through the project's channel layer, as a worker sends a projection's events to a conversation's
  sockets (`runtime.outbound`): a group with one member, each message a text.delta event;
- one call through the gateway as shipped (the `openai` SDK): a read of a session's items at the double;
- one live event read through the SDK's stream (measured by whoever reads one: see `ThreadCpu`).

Each is CPU of the calling thread only (the bench runs other threads), per piece, in ms.
"""

import asyncio
import time
import uuid

PUSH_BATCH = 50  # a channel holds 100 messages: each batch is received (untimed) before the next is sent


def push_cpu_ms(batches: int = 10) -> float:
    from channels.layers import get_channel_layer

    event = {
        "type": "text.delta",
        "seq": 1,
        "payload": {"messageId": str(uuid.uuid4()), "partId": f"text-{uuid.uuid4().hex}", "delta": "x" * 10},
    }

    async def pushes() -> float:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        group = f"bench-floor-{uuid.uuid4().hex}"
        await layer.group_add(group, channel)
        spent = 0.0
        try:
            for _ in range(batches):
                started = time.thread_time()
                for _ in range(PUSH_BATCH):
                    await layer.group_send(group, {"type": "conversation.events", "events": [event]})
                spent += time.thread_time() - started
                for _ in range(PUSH_BATCH):
                    await layer.receive(channel)
        finally:
            await layer.group_discard(group, channel)
        return spent

    return 1000 * asyncio.run(pushes()) / (batches * PUSH_BATCH)


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
