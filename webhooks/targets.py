"""Where a webhook may be sent (docs/design.md §9): never to this machine or the networks behind it.

A target URL is a user's input aimed at our own network: `http://127.0.0.1:5432/`, `http://169.254.169.254/`,
`http://localhost/` or a name whose DNS answer says 10.0.0.1 are all ways to reach what only the server can.
So every address a target's host resolves to is checked — loopback, private, link-local, multicast, reserved,
unspecified and shared ranges, IPv4 and IPv6, with IPv4 addresses carried inside IPv6 ones (IPv4-mapped,
IPv4-compatible, 6to4, Teredo, NAT64) checked as IPv4 — at creation and again at send time, and the request goes
to the address that was checked (`pinned_request`), so a DNS answer that changes between the check and the
connection (rebinding) is never used. A deployment with a receiver on its own network lists that network in
`IMPO_WEBHOOK_ALLOWED_NETWORKS`; plain `http` needs `IMPO_WEBHOOK_ALLOW_HTTP` (DEBUG alone allows neither).
"""

import ipaddress
import socket
from dataclasses import dataclass

import httpx
from django.conf import settings

from core.error_codes import ErrorCode
from core.errors import ApplicationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 prefixes whose last 32 bits are an IPv4 address a gateway would forward to (RFC 6052, RFC 4291 §2.5.5.1).
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


class TargetForbidden(ApplicationError):
    code = ErrorCode.WEBHOOK_TARGET_FORBIDDEN


@dataclass(frozen=True)
class Target:
    """A target URL and the address it resolved to, checked."""

    url: httpx.URL
    address: IPAddress


def _carried_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    carried = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    if address in _NAT64 or address in _IPV4_COMPATIBLE:
        carried.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [ipv4 for ipv4 in carried if ipv4 is not None]


def _internal(address: IPAddress) -> bool:
    return (
        not address.is_global
        or address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def address_allowed(address: IPAddress) -> bool:
    if any(address in ipaddress.ip_network(network) for network in settings.IMPO_WEBHOOK_ALLOWED_NETWORKS):
        return True
    addresses = [address, *(_carried_ipv4(address) if address.version == 6 else [])]
    return not any(_internal(each) for each in addresses)


def _checked_url(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise TargetForbidden("The webhook URL cannot be read.") from exc
    allowed_schemes = ("https", "http") if settings.IMPO_WEBHOOK_ALLOW_HTTP else ("https",)
    if parsed.scheme not in allowed_schemes:
        raise TargetForbidden("Webhook targets must use https.")
    if not parsed.host:
        raise TargetForbidden("The webhook URL names no host.")
    return parsed


def _resolve(url: httpx.URL) -> list[IPAddress]:
    """Every address the host resolves to, in the resolver's order; raises OSError when it resolves to none.

    The system resolver also reads the numeric forms a browser would (`2130706433`, `0x7f.1`) as addresses.
    """
    answers = socket.getaddrinfo(url.host, url.port or (443 if url.scheme == "https" else 80), type=socket.SOCK_STREAM)
    # An IPv6 answer may carry a zone (`fe80::1%eth0`); the address is what is checked.
    return list(dict.fromkeys(ipaddress.ip_address(answer[4][0].split("%", 1)[0]) for answer in answers))


def refuse_forbidden(url: str) -> None:
    """At creation: refuses a target whose scheme or any resolved address is not allowed.

    A name that does not resolve now is accepted (it may be published later); send time checks it again.
    """
    parsed = _checked_url(url)
    try:
        addresses = _resolve(parsed)
    except (OSError, UnicodeError):
        return
    if not all(address_allowed(address) for address in addresses):
        raise TargetForbidden("Webhook targets must be public addresses.")


def resolve_target(url: str) -> Target:
    """At send time: the address to connect to, every resolved address checked; raises TargetForbidden or
    OSError (nothing resolved)."""
    parsed = _checked_url(url)
    addresses = _resolve(parsed)
    if not all(address_allowed(address) for address in addresses):
        raise TargetForbidden("Webhook targets must be public addresses.")
    return Target(url=parsed, address=addresses[0])


def pinned_request(client: httpx.Client, target: Target, *, content: bytes, headers: dict) -> httpx.Request:
    """A POST to the checked address that still names the host: Host header and TLS SNI (and so the
    certificate checked) are the URL's host, so no second lookup decides where the request goes."""
    host_header = target.url.netloc.decode("ascii")
    return client.build_request(
        "POST",
        target.url.copy_with(host=str(target.address)),
        content=content,
        headers={**headers, "Host": host_header},
        extensions={"sni_hostname": target.url.host},
    )
