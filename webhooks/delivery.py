"""One delivery attempt: claim it, send it signed, record what the receiver answered.

The request is made outside any transaction: the claim committed before it (so the attempt is counted even
if this process dies mid-request) and the outcome is written after. The target is checked again and pinned to
the address checked (`targets`), no proxy from the environment is used, and redirects are not followed. What
is recorded says only "connection failed", "timed out", "HTTP <status>" or "target forbidden": a receiver's
error text would tell one closed port from another.
"""

import logging
import time

import httpx

from core.database import release_connection
from webhooks import services, signing, targets
from webhooks.clients import HostClients, post_status

logger = logging.getLogger(__name__)

# The process's clients, shared by its worker threads (webhooks/clients.py).
_clients = HostClients()

USER_AGENT = "Impo-Webhooks/1"
CONNECTION_FAILED = "connection failed"
TIMED_OUT = "timed out"
TARGET_FORBIDDEN = "target forbidden"


def deliver(delivery_id) -> str | None:
    """Makes one attempt if the delivery is due; returns its status afterwards (None when nothing was sent)."""
    attempt = services.claim_attempt(delivery_id)
    if attempt is None:
        return None
    timestamp = int(time.time())
    headers = signing.headers(
        delivery_id=attempt.delivery_id,
        event_type=attempt.event_type,
        secret=attempt.secret,
        timestamp=timestamp,
        body=attempt.body,
    )
    release_connection()  # a slow receiver must not hold one of the worker's pooled connections
    try:
        target = targets.resolve_target(attempt.url)
        # Only the status matters: the body is read only as far as `post_status` bounds it.
        client = _clients.for_host(target.url.host)
        request = targets.pinned_request(
            client, target, content=attempt.body, headers={**headers, "User-Agent": USER_AGENT}
        )
        response = post_status(client, request)
        code = response.status_code
        error = "" if 200 <= code < 300 else f"HTTP {code}"
        return services.record_outcome(attempt, response_code=code, error=error)
    except targets.TargetForbidden:
        logger.warning("webhook delivery %s: target forbidden", attempt.delivery_id)
        return services.record_outcome(attempt, response_code=None, error=TARGET_FORBIDDEN)
    except httpx.TimeoutException as exc:
        logger.info("webhook delivery %s attempt %d timed out: %r", attempt.delivery_id, attempt.number, exc)
        return services.record_outcome(attempt, response_code=None, error=TIMED_OUT)
    except (httpx.HTTPError, OSError, UnicodeError) as exc:
        logger.info("webhook delivery %s attempt %d failed: %r", attempt.delivery_id, attempt.number, exc)
        return services.record_outcome(attempt, response_code=None, error=CONNECTION_FAILED)
