"""Websocket authentication: a DRF token (`?token=` or `Authorization: Bearer`) or the web session."""

from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.contrib.auth.models import AnonymousUser
from rest_framework.authtoken.models import Token


@database_sync_to_async
def _user_for_token(key: str):
    token = Token.objects.select_related("user").filter(key=key, user__is_active=True).first()
    return token.user if token else None


def _offered_token(scope) -> str | None:
    headers = dict(scope.get("headers", []))
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    if authorization.startswith("Bearer "):
        return authorization.removeprefix("Bearer ").strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return query.get("token", [None])[0]


class _TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope, receive, send):
        key = _offered_token(scope)
        if key:
            # A presented token decides alone: a bad one is anonymous even beside a session.
            scope = dict(scope, user=(await _user_for_token(key)) or AnonymousUser())
        return await super().__call__(scope, receive, send)


def TokenOrSessionAuthMiddleware(inner):  # noqa: N802  (an ASGI middleware factory, named like one)
    return AuthMiddlewareStack(_TokenAuthMiddleware(inner))
