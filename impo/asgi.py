import os

from django.core.asgi import get_asgi_application

from impo import telemetry
from impo.request_threads import ReusedRequestThreads

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
# Under ASGI each request (and each database_sync_to_async call) runs in a thread of its own, and a persistent
# connection belongs to its thread: every request would leave an open connection behind until PostgreSQL
# refuses new clients (Django ticket #33497). The web process borrows pooled connections instead.
os.environ.setdefault("DATABASE_POOL", "1")
django_asgi_app = get_asgi_application()
telemetry.configure("impo-web")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402  (needs the app registry)

from runtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": ReusedRequestThreads(django_asgi_app),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
