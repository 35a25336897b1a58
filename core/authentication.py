"""Bearer tokens, resolved one way for every transport: DRF views, the SSE stream and websockets.

A token is looked up by `user_for_token` and nowhere else, so an inactive user, a blank token or a
malformed header is refused alike whichever door it knocks on.

Resolved tokens are cached in Redis (shared by every web process, keyed by the token's SHA-256, never the
token itself), so a request does not pay a database query for its credentials. Revocation stays immediate on
every process: deleting a token, or saving a user (deactivation, a changed flag), replaces the cached entries
with a tombstone before the change commits and again once it has (`forget_tokens_of`). A tombstone sends
lookups to the database and stops them refilling the cache (entries are written only where none exists), so a
lookup that read the database just before the change cannot put a stale entry back. Changes made around the
ORM's signals (a queryset `update()` of users, raw SQL) are not seen: such an entry lives TOKEN_CACHE_SECONDS.
"""

import hashlib
import json
import logging
import time

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from core import limits
from core.errors import WWW_AUTHENTICATE, ServiceUnavailable
from core.outages import Condition

logger = logging.getLogger(__name__)

# Redis away: logged once as it starts and once as it ends, not per request (docs/edge.md).
_token_cache_away = Condition(
    logger, started="token cache unavailable, reading the database", ended="token cache available again"
)

TOKEN_CACHE_SECONDS = 300
# Longer than any revoking transaction takes between its first tombstone and its commit.
TOMBSTONE_SECONDS = 60
# A database read older than this is not written to the cache: the tombstone it would have to respect may be gone.
FILL_WITHIN_SECONDS = 5
_TOMBSTONE = b"-"
# What the cached user carries; any other field is loaded from the database on first access (deferred).
_CACHED_USER_FIELDS = ("id", "username", "is_active", "is_staff", "is_superuser")


def bearer_key(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header ('' when blank); None for no or another scheme."""
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return key.strip()


def token_cache_key(key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"impo:tokens:{settings.DATABASES['default']['NAME']}:{digest}"


def user_for_token(key: str):
    """The active user a DRF token belongs to, or None."""
    if not key:
        return None
    cache_key = token_cache_key(key)
    client = limits.redis_client()
    try:
        cached = client.get(cache_key)
    except redis.RedisError as exc:
        _token_cache_away.failed(exc)
        client = None
        cached = None
    else:
        _token_cache_away.succeeded()
    if cached and cached != _TOMBSTONE:
        values = json.loads(cached)
        # `from_db` takes a partial row's values in the model's field order, whatever order the names are given in:
        # in another order each value lands in another field (the username in is_superuser, is_active in username).
        user_model = get_user_model()
        names = [field.attname for field in user_model._meta.concrete_fields if field.attname in _CACHED_USER_FIELDS]
        return user_model.from_db("default", names, [values[name] for name in names])
    read_at = time.monotonic()
    token = Token.objects.select_related("user").filter(key=key, user__is_active=True).first()
    if token is None:
        return None
    if client is not None and time.monotonic() - read_at < FILL_WITHIN_SECONDS:
        entry = json.dumps({name: getattr(token.user, name) for name in _CACHED_USER_FIELDS})
        try:
            client.set(cache_key, entry, nx=True, ex=TOKEN_CACHE_SECONDS)
        except redis.RedisError as exc:
            logger.warning("token cache not filled: %s", exc)
    return token.user


def forget_tokens(keys: list[str]) -> None:
    """Tombstones these tokens' cache entries now and again after commit (see the module docstring).

    Raises ServiceUnavailable (503, retryable) when Redis cannot be told: a revocation that cannot reach the cache
    must not commit quietly, and the caller (deleting an account, a token) is asked to try again, not told of an
    internal error.
    """
    if not keys:
        return
    cache_keys = [token_cache_key(key) for key in keys]

    def tombstone() -> None:
        try:
            with limits.redis_client().pipeline() as pipe:
                for cache_key in cache_keys:
                    pipe.set(cache_key, _TOMBSTONE, ex=TOMBSTONE_SECONDS)
                pipe.execute()
        except redis.RedisError as exc:
            raise ServiceUnavailable("The token cache is unreachable; try again shortly.") from exc

    tombstone()
    transaction.on_commit(tombstone, robust=True)


def forget_tokens_of(user) -> None:
    forget_tokens(list(Token.objects.filter(user=user).values_list("key", flat=True)))


# A user save that names only these fields changes nothing a cached entry says (a login stamps last_login).
_FIELDS_NOT_CACHED = frozenset({"last_login", "password"})


def _token_deleted(sender, instance, **kwargs):
    forget_tokens([instance.key])


def _user_saved(sender, instance, created, update_fields=None, **kwargs):
    if created or (update_fields is not None and set(update_fields) <= _FIELDS_NOT_CACHED):
        return
    forget_tokens_of(instance)


def connect_revocation_signals() -> None:
    """Token deletion (a user's deletion cascades to it) and user saves tombstone the cached entries."""
    post_delete.connect(_token_deleted, sender=Token, dispatch_uid="impo.token_deleted")
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="impo.user_saved")


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


class BearerRequestsSkipCsrfMiddleware:
    """A request presenting `Authorization: Bearer` is authenticated by its token alone (`request_user`, DRF's
    authentication order: never the session beside it), and a cross-site page cannot set that header without the
    API's consent: the session's CSRF rules do not apply to it. Without this, a bearer request to a plain view (or
    to no view) under /api/ was refused as a browser's (403 "CSRF cookie not set")."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if bearer_key(request.headers.get("Authorization", "")) is not None:
            request._dont_enforce_csrf_checks = True  # CsrfViewMiddleware's own switch
        return self.get_response(request)
