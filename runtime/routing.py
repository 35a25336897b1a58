from django.urls import path

from runtime.consumers import ConversationConsumer
from runtime.websocket_auth import TokenOrSessionAuthMiddleware

websocket_urlpatterns = [
    path(
        "ws/v1/conversations/<uuid:conversation_id>/",
        TokenOrSessionAuthMiddleware(ConversationConsumer.as_asgi()),
    ),
]
