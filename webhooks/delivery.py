"""One delivery attempt: claim it, send it signed, record what the receiver answered.

The request is made outside any transaction: the claim committed before it (so the attempt is counted even
if this process dies mid-request) and the outcome is written after.
"""

import logging
import time

import httpx
from django.conf import settings

from impo.database import release_connection
from webhooks import services, signing

logger = logging.getLogger(__name__)

USER_AGENT = "Impo-Webhooks/1"


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
        # Only the status matters: the response body is never read, so a receiver cannot hold the attempt open.
        with (
            httpx.Client(timeout=settings.IMPO_WEBHOOK_TIMEOUT_SECONDS, follow_redirects=False) as client,
            client.stream(
                "POST", attempt.url, content=attempt.body, headers={**headers, "User-Agent": USER_AGENT}
            ) as response,
        ):
            code = response.status_code
        error = "" if 200 <= code < 300 else f"the receiver answered {code}"
        return services.record_outcome(attempt, response_code=code, error=error)
    except httpx.HTTPError as exc:
        logger.info("webhook delivery %s attempt %d failed: %r", attempt.delivery_id, attempt.number, exc)
        return services.record_outcome(attempt, response_code=None, error=f"{type(exc).__name__}: {exc}")
