"""The OpenAPI description of ICA v1 says what the API really accepts and how it really refuses.

The schema is what clients (and the schemathesis fuzz test) hold the API to, so input rules enforced at the edge
— no unknown fields, no blank or NUL-bearing text, a body on DELETE — are declared here too, and every operation
lists the error statuses it can answer with, each in the ICA error body.
"""

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from impo.core.patterns import NOT_WHITESPACE_NOR_NUL

# No NUL anywhere and at least one character that is neither NUL nor whitespace: CleanTextField's rule.
NONBLANK_WITHOUT_NUL = rf"^[^\u0000]*{NOT_WHITESPACE_NOR_NUL}[^\u0000]*$"

_ERROR_DESCRIPTIONS = {
    400: "invalid_request: malformed JSON, an unknown or missing field, a value outside the input limits, a path id"
    " that is not a UUID, or an unknown, repeated or ill-formed query parameter.",
    401: "unauthorized: no valid session or token.",
    404: "not_found: no such object for this user (another user's object looks the same).",
    409: "A conflict: the same idempotency key with a different body, or a stale revision or state; for a message,"
    " also run_in_progress (retryable) when its conversation's policy is `reject` and a reply is unfinished, with"
    " that reply's `activeSubmissionId` in the error; for a retry, not_retryable when the run has not failed.",
    410: "The object expired or was cancelled.",
    413: "request_too_large: the JSON body is over 64 KiB.",
    415: "unsupported_media_type: the body is not application/json.",
    429: "rate_limited (retryable): a per-user limit; `Retry-After` says when to try again.",
    503: "service_unavailable (retryable): nothing was saved; the same command may be retried.",
}


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
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


def responses(success: dict, *error_statuses: int, also: dict[int, str] | None = None) -> dict:
    """`@extend_schema(responses=...)` for an operation: its success bodies, 400, 401, and the errors it names;
    `also` adds the operation's own codes to a status's description.

    Every operation may answer 400: any of them refuses a malformed path id or query string.
    """
    also = also or {}
    errors = {
        status: OpenApiResponse(
            ErrorBodySerializer, description=" ".join(filter(None, [_ERROR_DESCRIPTIONS[status], also.get(status)]))
        )
        for status in sorted({400, 401, *error_statuses, *also})
    }
    return {**success, **errors}


# Every write may answer 503 when the database fails, and every body must be JSON of at most 64 KiB.
WRITE_ERRORS = (400, 413, 415, 503)


class ImpoAutoSchema(AutoSchema):
    def _get_request_body(self, direction="request"):
        # docs/design.md §7's DELETE carries `{revision}` in its body; drf-spectacular only documents POST/PUT/PATCH
        # bodies.
        if self.method == "DELETE" and (serializer := self.get_request_serializer()) is not None:
            component = self.resolve_serializer(serializer, direction)
            return {"content": {"application/json": {"schema": component.ref}}, "required": True}
        return super()._get_request_body(direction)


class StrictSerializerExtension(OpenApiSerializerExtension):
    """A StrictSerializer refuses undeclared fields, so its object schema admits no additional properties."""

    target_class = "impo.core.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


class CleanTextFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "impo.core.serializers.CleanTextField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["pattern"] = NONBLANK_WITHOUT_NUL
        return schema
