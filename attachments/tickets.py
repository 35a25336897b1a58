"""The local store's upload URLs: `/api/v1/attachments/<id>/upload?ticket=<ticket>`, the ticket signed (SECRET_KEY)
for one attachment — whose manifest never changes once prepared — and its size, expiring after
IMPO_ATTACHMENT_UPLOAD_SECONDS. A signed value is readable, not secret: it names no key, name or hash, since URLs
end up in logs.

The web port's edge reads the ticket too (impo/http_handler.py): an upload's body may be as large as its manifest
says, where every other body is bounded by DATA_UPLOAD_MAX_MEMORY_SIZE, and it gets time in proportion.
"""

import re
from dataclasses import dataclass
from urllib.parse import parse_qs

from django.conf import settings
from django.core import signing

UPLOAD_PATH = re.compile(r"^/api/v1/attachments/[^/]+/upload/?$")
_SALT = "attachments.upload-ticket"


@dataclass(frozen=True)
class Ticket:
    attachment_pk: int
    size_bytes: int


def issue(ticket: Ticket) -> str:
    return signing.dumps({"a": ticket.attachment_pk, "s": ticket.size_bytes}, salt=_SALT)


def read(token: str) -> Ticket | None:
    """The ticket a token carries, or None when it is forged, altered or expired."""
    try:
        fields = signing.loads(token, salt=_SALT, max_age=settings.IMPO_ATTACHMENT_UPLOAD_SECONDS)
    except signing.BadSignature:  # SignatureExpired included
        return None
    return Ticket(attachment_pk=fields["a"], size_bytes=fields["s"])


def upload_body_bounds(path: str, query_string: bytes) -> tuple[int, float] | None:
    """(bytes, seconds) the body of a request may take when it is an upload with a valid ticket."""
    if not UPLOAD_PATH.match(path):
        return None
    tokens = parse_qs(query_string.decode("latin-1")).get("ticket", [])
    ticket = read(tokens[0]) if len(tokens) == 1 else None
    if ticket is None:
        return None
    seconds = settings.IMPO_WEB_BODY_SECONDS + ticket.size_bytes / settings.IMPO_ATTACHMENT_UPLOAD_BYTES_PER_SECOND
    return ticket.size_bytes, seconds
