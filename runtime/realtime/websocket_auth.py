"""Websocket authentication: a DRF token (`?token=` or `Authorization: Bearer`) or the web session.

A session cookie is ambient: the browser attaches it to a socket any page opens, including a page on another
port of the same host (cookies ignore ports) or another site. So a socket that is not token-authenticated must
come from the site's own origin: the Origin header must equal the scheme and Host the socket was opened with,
or be listed in CSRF_TRUSTED_ORIGINS, and the Host must be an allowed one. A token is never sent by the browser
on its own, so token sockets (native apps, which may send no Origin at all) are not held to an origin.
Refusals are a 403 at the handshake (a close before accept), the one refusal every ASGI server can give.
"""

from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host

from core.authentication import bearer_key, user_for_token


def _headers(scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


def _offered_token(scope) -> str | None:
    key = bearer_key(_headers(scope).get("authorization", ""))
    if key is not None:
        return key
    # Browsers cannot set headers on a websocket, so a page holding a token passes it in the query.
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    return query.get("token", [None])[0]


def _is_secure(scope, headers: dict[str, str]) -> bool:
    """As Django's `request.is_secure()`: the trusted proxy's header when configured and present."""
    if proxy_header := getattr(settings, "SECURE_PROXY_SSL_HEADER", None):
        name, secure_value = proxy_header
        forwarded = headers.get(name.removeprefix("HTTP_").replace("_", "-").lower())
        if forwarded is not None:
            return forwarded.split(",", 1)[0].strip() == secure_value
    return scope.get("scheme") in ("wss", "https")


def same_site_origin(scope) -> bool:
    """Whether the socket's Origin is the site itself (or a trusted origin) on an allowed Host."""
    headers = _headers(scope)
    origin = headers.get("origin", "").strip().lower()
    host = headers.get("host", "").strip().lower()
    domain, _ = split_domain_port(host)
    if not origin or not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    own_origin = f"{'https' if _is_secure(scope, headers) else 'http'}://{host}"
    return origin == own_origin or origin in {trusted.lower() for trusted in settings.CSRF_TRUSTED_ORIGINS}


class _TokenOrSameOriginMiddleware(BaseMiddleware):
    async def __call__(self, scope, receive, send):
        key = _offered_token(scope)
        if key is not None:
            # A presented token decides alone: a bad one is anonymous even beside a session.
            user = await database_sync_to_async(user_for_token)(key)
            return await super().__call__(dict(scope, user=user or AnonymousUser()), receive, send)
        if not same_site_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await super().__call__(scope, receive, send)


def TokenOrSessionAuthMiddleware(inner):  # noqa: N802  (an ASGI middleware factory, named like one)
    return AuthMiddlewareStack(_TokenOrSameOriginMiddleware(inner))
