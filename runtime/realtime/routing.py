from django.urls import path

from runtime.realtime.consumers import ConversationConsumer
from runtime.realtime.websocket_auth import TokenOrSessionAuthMiddleware

websocket_urlpatterns = [
    path(
        "ws/v1/conversations/<uuid:conversation_id>/",
        TokenOrSessionAuthMiddleware(ConversationConsumer.as_asgi()),
    ),
]
