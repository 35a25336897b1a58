import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from impo.errors import ApplicationError


class BoundedJSONParser(BaseParser):
    """JSON bodies of at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes, with a top-level object.

    DRF's own parser reads the request stream directly, bypassing Django's size check, so the
    bound is enforced here before anything is decoded.
    """

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise ApplicationError(f"JSON body exceeds {limit} bytes.", code="request_too_large", status=413)
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ParseError(f"Malformed JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ParseError("The JSON body must be an object.")
        return data


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")
