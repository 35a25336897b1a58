"""The web port's edge: deadlines and bounds a slow or greedy client meets before any view runs (docs/edge.md).

- Headers must arrive within IMPO_WEB_HEADER_SECONDS of a connection opening (or of the next request on a kept-alive
  connection starting): uvicorn itself waits for them forever, so a client trickling header lines holds its socket
  for as long as it likes. Late, the connection is answered 408 and closed.
- A body, whatever its framing (`Content-Length` or `Transfer-Encoding: chunked`), must arrive within
  IMPO_WEB_BODY_SECONDS (408 `request_timeout`) and stay within DATA_UPLOAD_MAX_MEMORY_SIZE (413
  `request_too_large` as soon as it is passed, the rest never read). Django reads any body whole into a temporary
  file before the view is chosen, and DRF takes a missing `Content-Length` for an empty body: a chunked command was
  parsed as `{}`. Here the body is counted as it comes, and its length is what the request then says.
- Each client address may hold IMPO_WEB_CONNECTIONS_PER_ADDRESS HTTP connections to a process; one more is answered
  429 and closed. Connections from a trusted proxy (IMPO_WEB_FORWARDED_ALLOW_IPS) are not counted: the proxy stands
  for many clients and bounds them itself. A websocket leaves the count once upgraded (its user's own limit holds it).
- Idle kept-alive connections close after gunicorn's `keepalive` (impo/web_server.py).
"""

import asyncio
import ipaddress
import json
import logging
import tempfile
from collections import Counter
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import RequestAborted
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from core.errors import ApplicationError, RateLimited, RequestTimeout, RequestTooLarge, error_envelope
from core.middleware import request_id_from

logger = logging.getLogger(__name__)


class BodyRefused(Exception):
    """A body the edge will not read further; `refusal` is what the client is told."""

    def __init__(self, refusal: ApplicationError):
        super().__init__(refusal.message)
        self.refusal = refusal


def declared_length(scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server's parser refuses such a request before it gets here
    return None


async def read_bounded_body(receive, *, limit: int, seconds: float, spool_bytes: int):
    """The whole body in a file (in memory up to `spool_bytes`, on disk beyond), within `limit` bytes and `seconds`;
    raises BodyRefused otherwise, and Django's RequestAborted when the client leaves."""
    body_file = tempfile.SpooledTemporaryFile(  # noqa: SIM115  (the caller closes it with the request)
        max_size=spool_bytes, mode="w+b"
    )
    size = 0
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise RequestAborted
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyRefused(RequestTooLarge(f"The request body exceeds {limit} bytes."))
                body_file.write(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        body_file.close()
        raise BodyRefused(RequestTimeout(f"The request body did not arrive within {seconds:g} s.")) from None
    except BaseException:
        body_file.close()
        raise
    body_file.seek(0)
    return body_file


def refusal_headers(scope, refusal: ApplicationError) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and ICA body answering `refusal` before Django has a request; the connection is closed after it."""
    offered = next((value for name, value in scope["headers"] if name == b"x-request-id"), b"")
    request_id = request_id_from(offered.decode("latin1"))
    body = json.dumps(error_envelope(request_id, refusal.code, refusal.message, refusal.retryable)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode()),
        (b"connection", b"close"),
    ]
    if refusal.retry_after is not None:
        headers.append((b"retry-after", str(refusal.retry_after).encode()))
    return headers, body


def _raw_refusal(refusal: ApplicationError) -> bytes:
    """A whole HTTP/1.1 response for a refusal made below ASGI (no request, or none complete yet)."""
    headers, body = refusal_headers({"headers": []}, refusal)
    status = HTTPStatus(refusal.status)
    lines = [f"HTTP/1.1 {status.value} {status.phrase}".encode()]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _trusted_proxies(config) -> list:
    if not config.proxy_headers:
        return []
    allowed = config.forwarded_allow_ips
    entries = allowed if isinstance(allowed, list) else str(allowed).split(",")
    networks = []
    for entry in (entry.strip() for entry in entries):
        if entry == "*":
            return ["*"]
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue  # a socket path or host name: never a TCP peer's address
    return networks


class EdgeHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a per-address connection cap."""

    # Per process: uvicorn runs one event loop per process, and every protocol instance lives on it.
    _connections_per_address: Counter = Counter()
    _refused_addresses: set[str] = set()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._counted_address: str | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        if address is not None and not self._trusted_proxy(address):
            cap = settings.IMPO_WEB_CONNECTIONS_PER_ADDRESS
            if self._connections_per_address[address] >= cap:
                # One line when an address starts being refused and one when it is served again, not one a socket.
                if address not in self._refused_addresses:
                    self._refused_addresses.add(address)
                    logger.warning("refusing connections from %s: %d open, the cap per address", address, cap)
                refusal = RateLimited("Too many open connections from this address.", retry_after=1)
                transport.write(_raw_refusal(refusal))
                transport.close()
                return
            if address in self._refused_addresses:
                self._refused_addresses.discard(address)
                logger.warning("accepting connections from %s again", address)
            self._connections_per_address[address] += 1
            self._counted_address = address
        self._arm_header_deadline()

    def connection_lost(self, exc) -> None:
        self._disarm_header_deadline()
        self._uncount()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_deadline()

    def on_headers_complete(self) -> None:
        self._disarm_header_deadline()
        super().on_headers_complete()

    def handle_websocket_upgrade(self) -> None:
        self._disarm_header_deadline()
        self._uncount()
        super().handle_websocket_upgrade()

    def _trusted_proxy(self, address: str) -> bool:
        proxies = _trusted_proxies(self.config)
        if proxies == ["*"]:
            return True
        try:
            peer = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(peer in network for network in proxies)

    def _uncount(self) -> None:
        if self._counted_address is not None:
            self._connections_per_address[self._counted_address] -= 1
            if self._connections_per_address[self._counted_address] <= 0:
                del self._connections_per_address[self._counted_address]
            self._counted_address = None

    def _arm_header_deadline(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(settings.IMPO_WEB_HEADER_SECONDS, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered; the next one's headers get their own deadline
        seconds = settings.IMPO_WEB_HEADER_SECONDS
        self.transport.write(_raw_refusal(RequestTimeout(f"The request headers did not arrive within {seconds:g} s.")))
        self.transport.close()
