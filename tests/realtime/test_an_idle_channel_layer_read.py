"""An idle consumer's read from the channel layer outlives redis-py's default socket timeout."""

import asyncio

from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from channels_redis.core import RedisChannelLayer


def test_waiting_longer_than_one_blocking_read_on_an_idle_channel_raises_no_redis_timeout():
    # The layer's blocking read lasts brpop_timeout and is then retried; with a socket timeout no longer
    # than that read, redis-py raised TimeoutError here and the websocket consumer died with it.
    # A layer of its own, built from the settings: the shared one holds pools bound to other tests' loops.
    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)

    async def wait_idle():
        channel = await layer.new_channel()
        try:
            await asyncio.wait_for(layer.receive(channel), timeout=RedisChannelLayer.brpop_timeout + 2)
        except TimeoutError:
            return "still waiting"
        finally:
            await layer.close_pools()
        return "received"

    assert async_to_sync(wait_idle)() == "still waiting"
