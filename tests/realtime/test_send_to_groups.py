"""One send for several groups (a group commit's conversations) reaches each group's channels as `group_send` would:
one message per group on each member channel, in web processes of their own, within the channels' capacity."""

import asyncio
import uuid

from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers


def _layer():
    # Layers of their own, built from the settings: the shared one holds pools bound to other tests' loops.
    return channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)


async def _received(layer, channel) -> list:
    """Every message waiting on the channel now."""
    messages = []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), timeout=0.5))
        except TimeoutError:
            return messages


def test_each_group_s_message_reaches_every_member_channel_once_across_web_processes():
    sender, web_b, web_c = _layer(), _layer(), _layer()
    g1, g2, empty = (f"conversation.{uuid.uuid4()}" for _ in range(3))

    async def scenario():
        b1, b2, c1 = await web_b.new_channel(), await web_b.new_channel(), await web_c.new_channel()
        try:
            for group, channel in ((g1, b1), (g1, b2), (g2, b2), (g2, c1)):
                await web_b.group_add(group, channel)
            await sender.send_to_groups(
                {
                    g1: {"type": "conversation.events", "events": [{"seq": 1}]},
                    g2: {"type": "conversation.events", "events": [{"seq": 7}, {"seq": 8}]},
                    empty: {"type": "conversation.events", "events": [{"seq": 1}]},
                }
            )
            return {
                name: await _received(layer, channel)
                for name, layer, channel in (("b1", web_b, b1), ("b2", web_b, b2), ("c1", web_c, c1))
            }
        finally:
            for layer in (sender, web_b, web_c):
                await layer.close_pools()

    received = async_to_sync(scenario)()
    seqs = {name: sorted(tuple(e["seq"] for e in m["events"]) for m in messages) for name, messages in received.items()}
    assert seqs == {"b1": [(1,)], "b2": [(1,), (7, 8)], "c1": [(7, 8)]}
    assert all(m["type"] == "conversation.events" for messages in received.values() for m in messages)


def test_a_full_channel_drops_the_message_for_itself_only():
    sender, web = _layer(), _layer()
    group = f"conversation.{uuid.uuid4()}"

    async def scenario():
        full = await web.new_channel()
        other = _layer()  # the free channel in a web process of its own: its key is not the full one's
        free = await other.new_channel()
        try:
            await web.group_add(group, full)
            await web.group_add(group, free)
            for index in range(web.capacity):
                await sender.send(full, {"type": "filler", "index": index})
            await sender.send_to_groups({group: {"type": "conversation.events", "events": [{"seq": 1}]}})
            return len(await _received(web, full)), await _received(other, free)
        finally:
            for layer in (sender, web, other):
                await layer.close_pools()

    full_count, free_messages = async_to_sync(scenario)()
    assert full_count == sender.capacity
    assert [m["events"] for m in free_messages] == [[{"seq": 1}]]
