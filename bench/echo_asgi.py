"""The stream baseline: a bare Channels websocket echo through the same Redis channel layer.

A client's frame goes to a consumer, out through `group_send` to the connection's own group (as every product
event does) and back to the client: the least any websocket event delivered by this stack can cost.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
django.setup()

from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402


class EchoConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.group = f"bench-echo-{self.channel_name.replace('!', '-')}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        await self.channel_layer.group_send(self.group, {"type": "echo.reply", "body": content})

    async def echo_reply(self, message):
        await self.send_json(message["body"])


application = ProtocolTypeRouter({"websocket": URLRouter([path("echo/", EchoConsumer.as_asgi())])})
