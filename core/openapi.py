"""The OpenAPI description of ICA v1 says what the API really accepts and how it really refuses.

The schema is what clients (and the schemathesis fuzz test) hold the API to, so input rules enforced at the edge
— no unknown fields, no blank or NUL-bearing text, a body on DELETE — are declared here too, and every operation
lists the error statuses it can answer with, each in the ICA error body with the codes (from `core.error_codes`)
that status may carry there.
"""

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers

from core.error_codes import HTTP_CODES, RUN_ERROR_CODES, TOOL_ERROR_CODES, ErrorCode
from core.patterns import NOT_WHITESPACE_NOR_NUL

# No NUL anywhere and at least one character that is neither NUL nor whitespace: CleanTextField's rule.
NONBLANK_WITHOUT_NUL = rf"^[^\u0000]*{NOT_WHITESPACE_NOR_NUL}[^\u0000]*$"

_ERROR_DESCRIPTIONS = {
    400: "invalid_request: malformed JSON, an unknown or missing field, a value outside the input limits, a path id"
    " that is not a UUID, or an unknown, repeated or ill-formed query parameter.",
    401: "unauthorized: no valid session or token.",
    403: "Authenticated, but refused.",
    404: "not_found: no such object for this user (another user's object looks the same).",
    408: "request_timeout (retryable): the body did not arrive in time; nothing was saved.",
    409: "A conflict.",
    410: "The object expired or was cancelled.",
    413: "request_too_large: the JSON body is over 64 KiB.",
    415: "unsupported_media_type: the body is not application/json.",
    422: "The content was refused.",
    429: "rate_limited (retryable): a per-user limit; `Retry-After` says when to try again.",
    503: "service_unavailable (retryable): nothing was saved; the same command may be retried.",
}


# The codes any operation answering one of these statuses may give. A 409 or 410 is always the operation's own:
# an operation names its codes (or, naming none, may give any of the catalogue's for that status).
_GENERAL_CODES = {
    400: (ErrorCode.INVALID_REQUEST,),
    401: (ErrorCode.UNAUTHORIZED,),
    404: (ErrorCode.NOT_FOUND,),
    413: (ErrorCode.REQUEST_TOO_LARGE,),
    415: (ErrorCode.UNSUPPORTED_MEDIA_TYPE,),
    429: (ErrorCode.RATE_LIMITED,),
    503: (ErrorCode.SERVICE_UNAVAILABLE,),
}


def _open_code_schema(known: tuple[ErrorCode, ...], passed_through: str) -> dict:
    """A code field that may also carry a code from outside: the known ones listed, any string allowed."""
    return {
        "anyOf": [{"type": "string", "enum": [code.value for code in known]}, {"type": "string"}],
        "description": f"One of the listed codes, or {passed_through}.",
    }


@extend_schema_field(_open_code_schema(RUN_ERROR_CODES, "the provider's own code of a failed turn"))
class RunErrorCodeField(serializers.CharField):
    pass


@extend_schema_field(_open_code_schema(TOOL_ERROR_CODES, "the code a device reported with a failed result"))
class ToolErrorCodeField(serializers.CharField):
    pass


# The error body's `code`: every HTTP code of the catalogue, each with its meaning.
HTTP_CODE_CHOICES = [(code.value, code.meaning) for code in HTTP_CODES]


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=HTTP_CODE_CHOICES)
    message = serializers.CharField()
    retryable = serializers.BooleanField()
    activeSubmissionId = serializers.UUIDField(
        required=False, help_text="run_in_progress only: the unfinished submission the message would have raced."
    )
    fields = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text='A refused body (400): each refused field\'s path (`schedule.cron`; "" for the body as a whole)'
        " and its first message, so a form can mark them all.",
    )


class ErrorBodySerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
    requestId = serializers.CharField()


class ErrorResponse(OpenApiResponse):
    """An error status of an operation, in the ICA error body, with the codes it may carry."""

    def __init__(self, codes: tuple[ErrorCode, ...], description: str):
        super().__init__(ErrorBodySerializer, description=description)
        self.codes = codes


def responses(success: dict, *errors: int | ErrorCode) -> dict:
    """`@extend_schema(responses=...)` for an operation: its success bodies, 400, 401, and the errors it names —
    a status, or a code of the catalogue (its status, narrowed to the codes named, each described).

    Every operation may answer 400: any of them refuses a malformed path id or query string.
    """
    named = [error for error in errors if isinstance(error, ErrorCode)]
    statuses = {400, 401, *(error for error in errors if not isinstance(error, ErrorCode))}
    statuses |= {code.status for code in named}
    answers = dict(success)
    for status in sorted(statuses):
        general = _GENERAL_CODES.get(status, ())
        own = tuple(code for code in named if code.status == status)
        codes = general + own or tuple(code for code in HTTP_CODES if code.status == status)
        meanings = [f"{code.value}: {code.meaning}" for code in codes if code not in general]
        answers[status] = ErrorResponse(codes, " ".join([_ERROR_DESCRIPTIONS[status], *meanings]))
    return answers


def narrowed_error_schema(error_body: dict, codes) -> dict:
    """The error body's schema with its code narrowed to what an operation may answer with one status."""
    enum = {"type": "string", "enum": [code.value for code in codes]}
    narrowed = {"type": "object", "properties": {"error": {"type": "object", "properties": {"code": enum}}}}
    return {"allOf": [error_body, narrowed]}


# Every write may answer 503 when the database fails, and every body must be JSON of at most 64 KiB.
WRITE_ERRORS = (400, 413, 415, 503)


class ImpoAutoSchema(AutoSchema):
    def _get_response_for_code(self, serializer, status_code, media_types=None, direction="response"):
        response = super()._get_response_for_code(serializer, status_code, media_types, direction)
        if isinstance(serializer, ErrorResponse):
            for content in response["content"].values():
                content["schema"] = narrowed_error_schema(content["schema"], serializer.codes)
        return response

    def _get_request_body(self, direction="request"):
        # docs/design.md §7's DELETE carries `{revision}` in its body; drf-spectacular only documents POST/PUT/PATCH
        # bodies.
        if self.method == "DELETE" and (serializer := self.get_request_serializer()) is not None:
            component = self.resolve_serializer(serializer, direction)
            return {"content": {"application/json": {"schema": component.ref}}, "required": True}
        return super()._get_request_body(direction)


class StrictSerializerExtension(OpenApiSerializerExtension):
    """A StrictSerializer refuses undeclared fields, so its object schema admits no additional properties."""

    target_class = "core.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


class CleanTextFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "core.serializers.CleanTextField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["pattern"] = NONBLANK_WITHOUT_NUL
        return schema
