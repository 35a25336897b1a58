"""Password forms (the web login and the admin's) refuse further guesses after repeated failures.

Failures are counted per username and client address, so a guesser is stopped without locking the real
user out from everywhere. The count lives in Redis; when Redis cannot be reached the form fails closed
(503): guessing passwords during an outage is exactly what the throttle exists to prevent. Behind a proxy,
set IMPO_WEB_FORWARDED_ALLOW_IPS to the proxy so the client address is the caller's, not the proxy's.
"""

import functools
import logging

from django.conf import settings

from impo.core import limits
from impo.core.errors import RateLimited, ServiceUnavailable, application_error_response

LIMIT = "login-failures"
UNAVAILABLE_RETRY_AFTER_SECONDS = 30

logger = logging.getLogger(__name__)


def throttled_login(view):
    """Wraps a login view: a POST is refused while its username and address have too many recent failures."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = request.POST.get("username", "").strip().lower()
        identity = limits.failure_key(username, request.META.get("REMOTE_ADDR", ""))
        try:
            wait = limits.failures_blocked(LIMIT, identity, allowed=settings.IMPO_LIMIT_LOGIN_FAILURES)
        except limits.LimitsUnavailable as exc:
            logger.warning("login refused, the failure count is unreachable: %s", exc)
            unavailable = ServiceUnavailable(
                "Login is unavailable right now.", retry_after=UNAVAILABLE_RETRY_AFTER_SECONDS
            )
            return application_error_response(request, unavailable)
        if wait is not None:
            return application_error_response(
                request, RateLimited("Too many failed logins; try again later.", retry_after=wait)
            )
        response = view(request, *args, **kwargs)
        # Success is this username signed in now, not merely a session already open in this browser.
        signed_in = request.user.is_authenticated and request.user.get_username().lower() == username
        try:
            if signed_in:
                limits.clear_failures(LIMIT, identity)
            else:
                limits.record_failure(LIMIT, identity, window_seconds=settings.IMPO_LIMIT_LOGIN_WINDOW_SECONDS)
        except limits.LimitsUnavailable as exc:
            logger.warning("login failure count not updated: %s", exc)
        return response

    return wrapped
