"""One Web Push attempt, claimed by the sender's pass (`push_loop`): encrypt and sign it, send it to the checked
address, and say what the push service answered, for the pass to record.

The message is encrypted to the browser's keys (RFC 8291, `aes128gcm`, through `pywebpush`/`http_ece`) and signed
with the server's VAPID key (RFC 8292, `py_vapid`); those libraries only build the body and headers. The request
itself goes like a webhook's (`targets`): the endpoint is checked again now and the connection pinned to the
address checked, no proxy from the environment, no redirects. Nothing of the endpoint, the keys or the message
reaches a log: only the delivery id and what became of it.
"""

import base64
import functools
import hashlib
import json
import logging
import ssl
import time

import certifi
import httpx
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from py_vapid import Vapid02
from pywebpush import WebPusher

from webhooks import push_services, targets
from webhooks.clients import HostClients, post_status
from webhooks.delivery import CONNECTION_FAILED, TARGET_FORBIDDEN, TIMED_OUT

logger = logging.getLogger(__name__)

USER_AGENT = "Impo-Push/1"
# RFC 8030 §5.2 bounds a push message's body; RFC 8291's framing of one record takes 103 bytes of it.
MAX_BODY_BYTES = 4096
MAX_PLAINTEXT_BYTES = MAX_BODY_BYTES - 103
VAPID_LIFETIME_SECONDS = 12 * 3600


class PushNotConfigured(Exception):
    pass


@functools.cache
def _vapid(private_key: str) -> Vapid02:
    return Vapid02.from_raw(private_key.encode("ascii"))


def vapid() -> Vapid02 | None:
    """The server's VAPID key, or None when no key is set (push is then off)."""
    return _vapid(settings.IMPO_VAPID_PRIVATE_KEY) if settings.IMPO_VAPID_PRIVATE_KEY else None


def vapid_public_key() -> str | None:
    """What `pushManager.subscribe({applicationServerKey})` takes: base64url of the uncompressed P-256 point."""
    key = vapid()
    if key is None:
        return None
    raw = key.public_key.public_bytes(
        encoding=serialization.Encoding.X962, format=serialization.PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def topic(notification_id) -> str:
    """RFC 8030 §5.4: at most 32 base64url characters. One per notification, the same on every attempt, so a push
    service keeps one copy of a repeat it has not delivered yet."""
    digest = hashlib.sha256(str(notification_id).encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest[:24]).decode("ascii")


def encoded_payload(payload: dict) -> bytes:
    """The message as sent (before encryption): compact JSON, kept under what one push may carry."""
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_PLAINTEXT_BYTES:
        raise ValueError("a push payload is over 4 KiB")
    return data


def _request_parts(attempt: push_services.PushAttempt, url: httpx.URL) -> tuple[bytes, dict]:
    key = vapid()
    if key is None:
        raise PushNotConfigured
    subscription = {"endpoint": attempt.endpoint, "keys": {"p256dh": attempt.p256dh, "auth": attempt.auth}}
    body = WebPusher(subscription).encode(encoded_payload(attempt.payload), content_encoding="aes128gcm")["body"]
    origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
    claims = {"aud": origin, "sub": settings.IMPO_VAPID_SUBJECT, "exp": int(time.time()) + VAPID_LIFETIME_SECONDS}
    headers = {
        **key.sign(claims),
        "Content-Encoding": "aes128gcm",
        "Content-Type": "application/octet-stream",
        "TTL": str(settings.IMPO_PUSH_TTL_SECONDS),
        "Topic": topic(attempt.notification_id),
        # RFC 8030 §5.3: a waiting approval is worth waking a device on battery saver; the rest is normal.
        "Urgency": "high" if attempt.kind == "approval" else "normal",
        "User-Agent": USER_AGENT,
    }
    return body, headers


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default verification (certifi's roots), made once per process: building it for every client took
    about 110 ms of CPU, far more than the push itself, and capped one sender at a few pushes a second."""
    return ssl.create_default_context(cafile=certifi.where())


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


def new_clients() -> HostClients:
    """A sender's clients (push services are a handful of hosts)."""
    return HostClients(verify=_tls())


def send(attempt: push_services.PushAttempt, clients: HostClients) -> push_services.PushOutcome:
    """Makes one claimed attempt; returns what the push service answered, for the pass to record."""
    outcome = functools.partial(push_services.PushOutcome, attempt)
    attempt = push_services.with_decision_actions(attempt)
    try:
        target = targets.resolve_target(attempt.endpoint)
        body, headers = _request_parts(attempt, target.url)
        client = clients.for_host(target.url.host)
        response = post_status(client, targets.pinned_request(client, target, content=body, headers=headers))
        code = response.status_code
        if code in (404, 410):
            logger.info("push %s: the subscription is gone (HTTP %d); removing it", attempt.delivery_id, code)
        # 400 (the message is malformed) and 413 (too large) will not change by sending it again.
        return outcome(
            code,
            error="" if 200 <= code < 300 else f"HTTP {code}",
            retry_after=_retry_after(response),
            permanent=code in (400, 413),
        )
    except targets.TargetForbidden:
        logger.warning("push %s: target forbidden", attempt.delivery_id)
        return outcome(None, error=TARGET_FORBIDDEN, permanent=True)
    except PushNotConfigured:
        logger.warning("push %s: no VAPID key is set; trying again later", attempt.delivery_id)
        return outcome(None, error="push is not configured")
    except httpx.TimeoutException:
        logger.info("push %s attempt %d timed out", attempt.delivery_id, attempt.number)
        return outcome(None, error=TIMED_OUT)
    except (httpx.HTTPError, OSError, UnicodeError):
        # The exception's text may name the endpoint's host: not logged.
        logger.info("push %s attempt %d: connection failed", attempt.delivery_id, attempt.number)
        return outcome(None, error=CONNECTION_FAILED)
