"""How a delivery is signed: HMAC-SHA256 over `<timestamp>.<body>` with the endpoint's secret (docs/api.md "Webhooks").

The timestamp is signed too, so a receiver that refuses old timestamps cannot be fed a replayed request.
"""

import hashlib
import hmac
import json
import secrets

SIGNATURE_VERSION = "v1"
HEADER_ID = "Impo-Webhook-Id"
HEADER_TIMESTAMP = "Impo-Webhook-Timestamp"
HEADER_SIGNATURE = "Impo-Webhook-Signature"
HEADER_EVENT = "Impo-Webhook-Event"


def new_secret() -> str:
    return f"whsec_{secrets.token_hex(32)}"


def body_bytes(payload: dict) -> bytes:
    """The exact bytes sent; the same payload always gives the same body."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def headers(*, delivery_id, event_type: str, secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        HEADER_ID: str(delivery_id),
        HEADER_EVENT: event_type,
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_SIGNATURE: signature(secret, timestamp, body),
    }
