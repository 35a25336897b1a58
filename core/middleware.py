import logging
import re
import uuid

from django.core.exceptions import DisallowedHost
from django.urls import get_resolver
from django.utils.log import log_response

# A caller-supplied id is echoed only when it is short and printable, so it cannot inject headers
# or flood logs; anything else is replaced by a fresh id.
_ACCEPTABLE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_for(request) -> str:
    return getattr(request, "request_id", "") or ""


def request_id_from(offered: str) -> str:
    """The caller's `X-Request-Id` when acceptable, else a fresh id."""
    return offered if _ACCEPTABLE_REQUEST_ID.match(offered) else str(uuid.uuid4())


class RequestIdMiddleware:
    """Gives every request an id, echoed in `X-Request-Id` and in every ICA error body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = request_id_from(request.headers.get("X-Request-Id", ""))
        response = self.get_response(request)
        response["X-Request-Id"] = request.request_id
        return response


# The logger Django itself names a refused Host after, so what operators filter on stays the same.
_disallowed_host_logger = logging.getLogger("django.security.DisallowedHost")


class AllowedHostMiddleware:
    """Checks the Host header before anything reads it, and answers a host not in ALLOWED_HOSTS with the site's 400
    (handler400: the ICA envelope under /api/, the project's page elsewhere) and one INFO line, DEBUG or not.

    Left to Django, the first middleware reading the host raised DisallowedHost, which DEBUG answered with its
    technical page (HTML on /api/) and logged as an ERROR with a traceback: what every scanner of an address sends,
    unauthenticated, once per request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            request.get_host()
        except DisallowedHost as exc:
            response = get_resolver().resolve_error_handler(400)(request, exception=exc)
            log_response(str(exc), request=request, response=response, level="info", logger=_disallowed_host_logger)
            return response
        return self.get_response(request)
