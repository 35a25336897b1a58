import json
import re

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from core.error_codes import ErrorCode
from core.errors import ApplicationError

# Deeper than any command needs; Python's decoder (and whatever later walks the value: serializers, hashing,
# the JSON column) recurses once per level, so a 64 KiB body of brackets must be refused before it is parsed.
MAX_JSON_DEPTH = 32

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class BoundedJSONParser(BaseParser):
    """JSON bodies of at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes and MAX_JSON_DEPTH levels, with a top-level object.

    DRF's own parser reads the request stream directly, bypassing Django's size check, so the
    bound is enforced here before anything is decoded.
    """

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise ApplicationError(f"JSON body exceeds {limit} bytes.", code=ErrorCode.REQUEST_TOO_LARGE)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"Malformed JSON: {exc}") from exc
        if nesting_depth(text) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.")
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except ValueError as exc:
            raise ParseError(f"Malformed JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ParseError("The JSON body must be an object.")
        return data


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting outside string literals (malformed text is the decoder's to refuse)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")
