"""The CPU of the pieces a worker is made of and cannot make cheaper itself, measured in this process on the same
machine and in the same run as the figures they bound (bench/inflight.py):

- one push through the project's channel layer, as a worker sends a projection's events to a conversation's
  sockets (`runtime.outbound`): groups of one member, each message a text.delta event, side by side one
  `group_send` per conversation and one `send_to_groups` call for the conversations of one write;
- one call through the gateway as shipped (the `openai` SDK): a read of a session's items at the double;
- one live event read through the gateway (measured by whoever reads one: see `ThreadCpu`);
- the floor of a delta's read: its event's bytes decoded by a fast JSON decoder (`json_decode_cpu_ms`), beside the
  SDK's reading of the same bytes with and without a model per event (`sdk_read_cpu_ms`).

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


def json_decode_cpu_ms(payloads: list[bytes], rounds: int = 200) -> float:
    """CPU per event to decode these events' bytes (each an SSE `data` field as sent) with a fast JSON decoder: ujson,
    a C decoder the lock file already holds (orjson is not in it)."""
    import ujson

    started = time.thread_time()
    for _ in range(rounds):
        for payload in payloads:
            ujson.loads(payload)
    return 1000 * (time.thread_time() - started) / (rounds * len(payloads))


def sdk_read_cpu_ms(payloads: list[bytes], rounds: int = 20) -> dict[str, float]:
    """CPU per event to read these events' bytes as one SSE body held in memory (no socket: what reading costs apart
    from waiting on the network), side by side: the SDK building its model of each (`Stream[AgentSessionEvent]`, as
    the gateway read before issue 48), the SDK decoding SSE and JSON only and the gateway's record of each
    (`Stream[object]`, as it reads now), and the floor (ujson alone). Interleaved, so load hits each alike."""
    import httpx2
    import openai
    import ujson
    from openai import Stream
    from openai._models import FinalRequestOptions
    from openai.types.beta import AgentSessionEvent

    from rebyte.live_event import from_raw

    body = b"".join(b"event: %s\ndata: %s\n\n" % (ujson.loads(p)["type"].encode(), p) for p in payloads)
    client = openai.OpenAI(api_key="bench", base_url="http://127.0.0.1:9/v1")
    options = FinalRequestOptions.construct(method="get", url="/events", stream_mode="events")

    def stream(cast_to) -> Stream:
        response = httpx2.Response(200, content=body, request=httpx2.Request("GET", "http://127.0.0.1:9/v1/events"))
        return Stream(cast_to=cast_to, response=response, client=client, options=options)

    ways = {
        "the SDK's model of each event": lambda: list(stream(AgentSessionEvent)),
        "the SDK's decoding + the gateway's record": lambda: [from_raw(data) for data in stream(object)],
        "ujson alone": lambda: [ujson.loads(payload) for payload in payloads],
    }
    spent = dict.fromkeys(ways, 0.0)
    for _ in range(rounds):
        for name, read in ways.items():
            started = time.thread_time()
            read()
            spent[name] += time.thread_time() - started
    client.close()
    return {name: 1000 * seconds / (rounds * len(payloads)) for name, seconds in spent.items()}


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
