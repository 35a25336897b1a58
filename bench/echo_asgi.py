"""The websocket baseline: a bare Channels consumer that forwards whatever is `group_send` to its group.

Another process (the benchmark) sends to the group through the same Redis channel layer, and the consumer, served
by the same server as Impo, writes it to its socket, as every product event reaches a client: the least any
websocket event delivered by this stack can cost.
"""

import os
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
django.setup()

from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402


class GroupForwardConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.group = f"bench-forward-{uuid.uuid4().hex}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"group": self.group})

    async def disconnect(self, code):
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def bench_forward(self, message):
        await self.send_json(message["body"])


application = ProtocolTypeRouter({"websocket": URLRouter([path("forward/", GroupForwardConsumer.as_asgi())])})
