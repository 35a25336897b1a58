import os

import django

from core import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
# A persistent connection belongs to the thread that opened it, and under ASGI threads come and go (each
# database_sync_to_async call of a websocket consumer may get a new one): they would leave open connections behind
# until PostgreSQL refuses new clients (Django ticket #33497). The web process borrows pooled connections instead.
os.environ.setdefault("DATABASE_POOL", "1")
django.setup(set_prefix=False)
telemetry.configure("impo-web")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402  (needs the app registry)

from impo.http_handler import HttpHandler  # noqa: E402
from runtime.realtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": HttpHandler(),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
