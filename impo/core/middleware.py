import re
import uuid

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
