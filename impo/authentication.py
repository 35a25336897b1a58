"""Bearer tokens, resolved one way for every transport: DRF views, the SSE stream and websockets.

A token is looked up by `user_for_token` and nowhere else, so an inactive user, a blank token or a
malformed header is refused alike whichever door it knocks on.
"""

from asgiref.sync import sync_to_async
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from impo.errors import WWW_AUTHENTICATE


def bearer_key(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header ('' when blank); None for no or another scheme."""
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return key.strip()


def user_for_token(key: str):
    """The active user a DRF token belongs to, or None."""
    if not key:
        return None
    token = Token.objects.select_related("user").filter(key=key, user__is_active=True).first()
    return token.user if token else None


def request_user(request):
    """The user of a plain (non-DRF) view, or None: a presented token decides alone, else the session."""
    key = bearer_key(request.headers.get("Authorization", ""))
    if key is not None:
        return user_for_token(key)
    return request.user if request.user.is_authenticated else None


arequest_user = sync_to_async(request_user)


class BearerTokenAuthentication(TokenAuthentication):
    """DRF tokens, presented the way ICA v1 clients send them: `Authorization: Bearer <token>`.

    A TokenAuthentication by type and keyword only so the OpenAPI schema names the scheme; the lookup is ours.
    """

    keyword = "Bearer"

    def authenticate(self, request):
        key = bearer_key(request.headers.get("Authorization", ""))
        if key is None:
            return None
        user = user_for_token(key)
        if user is None:
            raise AuthenticationFailed("Invalid or missing bearer token.")
        return user, key

    def authenticate_header(self, request):
        return WWW_AUTHENTICATE
