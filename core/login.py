"""Password forms (the web login and the admin's) refuse further guesses after repeated failures.

Failures are counted twice: per (username, client address), so a guesser at one account is stopped without
locking the real user out from anywhere else, and per client address alone (a higher bound), so one address
cannot try a few passwords on every username. A success forgets its own (username, address) count only: an
attacker's own account does not reset the address's. The count lives in Redis; when Redis cannot be reached the
form fails closed (503): guessing passwords during an outage is exactly what the throttle exists to prevent.

The client address is only the caller's when the proxy in front is trusted (IMPO_WEB_FORWARDED_ALLOW_IPS): behind a
proxy that is not, every client has the proxy's address, and a guesser locks a username for everyone (the web
server warns at start-up when it binds beyond loopback without it; docs/edge.md).
"""

import functools
import logging

from django.conf import settings

from core import limits
from core.errors import RateLimited, ServiceUnavailable, application_error_response

LIMIT = "login-failures"
ADDRESS_LIMIT = "login-failures-per-address"
UNAVAILABLE_RETRY_AFTER_SECONDS = 30

logger = logging.getLogger(__name__)


def throttled_login(view):
    """Wraps a login view: a POST is refused while its username and address have too many recent failures."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = request.POST.get("username", "").strip().lower()
        address = request.META.get("REMOTE_ADDR", "")
        identity, address_identity = limits.failure_key(username, address), limits.failure_key(address)
        try:
            waits = [
                limits.failures_blocked(LIMIT, identity, allowed=settings.IMPO_LIMIT_LOGIN_FAILURES),
                limits.failures_blocked(
                    ADDRESS_LIMIT, address_identity, allowed=settings.IMPO_LIMIT_LOGIN_FAILURES_PER_ADDRESS
                ),
            ]
        except limits.LimitsUnavailable as exc:
            logger.warning("login refused, the failure count is unreachable: %s", exc)
            unavailable = ServiceUnavailable(
                "Login is unavailable right now.", retry_after=UNAVAILABLE_RETRY_AFTER_SECONDS
            )
            return application_error_response(request, unavailable)
        if any(waits):
            return application_error_response(
                request, RateLimited("Too many failed logins; try again later.", retry_after=max(filter(None, waits)))
            )
        response = view(request, *args, **kwargs)
        # Success is this username signed in now, not merely a session already open in this browser.
        signed_in = request.user.is_authenticated and request.user.get_username().lower() == username
        try:
            if signed_in:
                limits.clear_failures(LIMIT, identity)
            else:
                window = settings.IMPO_LIMIT_LOGIN_WINDOW_SECONDS
                limits.record_failure(LIMIT, identity, window_seconds=window)
                limits.record_failure(ADDRESS_LIMIT, address_identity, window_seconds=window)
        except limits.LimitsUnavailable as exc:
            logger.warning("login failure count not updated: %s", exc)
        return response

    return wrapped


def confirm_password(user, password: str, address: str) -> bool:
    """Whether `password` is the user's, for an action a token alone must not take (deleting the account). Failures
    count with the login form's, per (username, address): a stolen token does not guess the password faster than
    the form allows. Raises RateLimited while blocked, ServiceUnavailable when the count is unreachable."""
    identity = limits.failure_key(user.get_username().strip().lower(), address)
    try:
        wait = limits.failures_blocked(LIMIT, identity, allowed=settings.IMPO_LIMIT_LOGIN_FAILURES)
    except limits.LimitsUnavailable as exc:
        logger.warning("password check refused, the failure count is unreachable: %s", exc)
        raise ServiceUnavailable("Try again later.", retry_after=UNAVAILABLE_RETRY_AFTER_SECONDS) from exc
    if wait:
        raise RateLimited("Too many wrong passwords; try again later.", retry_after=wait)
    if password and user.check_password(password):
        return True
    try:
        limits.record_failure(LIMIT, identity, window_seconds=settings.IMPO_LIMIT_LOGIN_WINDOW_SECONDS)
    except limits.LimitsUnavailable as exc:
        logger.warning("password failure count not updated: %s", exc)
    return False
