"""The submission stream in the OpenAPI schema.

`GET /api/v1/submissions/{id}/stream` is an async Django view (Server-Sent Events), not a REST framework view, so
drf-spectacular does not see it; this post-processing hook states it, so the schema lists every route of ICA v1.
"""

from core.error_codes import ErrorCode
from core.openapi import narrowed_error_schema

STREAM_PATH = "/api/v1/submissions/{submission_id}/stream"


def _error(description: str, code: ErrorCode) -> dict:
    schema = narrowed_error_schema({"$ref": "#/components/schemas/ErrorBody"}, [code])
    return {"description": f"{code.value}: {description}", "content": {"application/json": {"schema": schema}}}


_EXAMPLE = "\n".join(
    [
        'data: {"type":"start","messageId":"<assistant message id>"}',
        "",
        'data: {"type":"reasoning-start","id":"<step id>"}',
        "",
        'data: {"type":"reasoning-delta","id":"<step id>","delta":"**Reading the message**"}',
        "",
        'data: {"type":"reasoning-end","id":"<step id>"}',
        "",
        'data: {"type":"text-start","id":"<part id>"}',
        "",
        'data: {"type":"text-delta","id":"<part id>","delta":"Echo: hello"}',
        "",
        'data: {"type":"text-end","id":"<part id>"}',
        "",
        'data: {"type":"finish"}',
        "",
        "data: [DONE]",
        "",
    ]
)


def add_submission_stream(result, generator, request, public):
    result["paths"][STREAM_PATH] = {
        "get": {
            "operationId": "v1_submissions_stream_retrieve",
            "summary": "Follow a submission's reply as Server-Sent Events (AI SDK UI Message Stream v1)",
            "description": "Each open rebuilds the whole current reply from the event log, then follows it live;"
            " the header `x-vercel-ai-ui-message-stream: v1` names the format. A reply that ends sends `finish`"
            " and `[DONE]`; a stream that can no longer read the log ends with an `error` part and no `finish`:"
            " reconcile with `GET /api/v1/submissions/{id}`. The agent's reasoning summaries, transient progress,"
            " come as `reasoning-start|delta|end` parts (absent once a settled run's progress was compacted)."
            " Closing the stream never cancels the run. No query parameters; a session cookie or"
            " `Authorization: Bearer <token>`.",
            "tags": ["v1"],
            "parameters": [
                {
                    "in": "path",
                    "name": "submission_id",
                    "required": True,
                    "schema": {"type": "string", "format": "uuid"},
                }
            ],
            "security": [{"cookieAuth": []}, {"tokenAuth": []}],
            "responses": {
                "200": {
                    "description": "The reply, part by part.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}, "example": _EXAMPLE}},
                },
                "400": _error("a query parameter, or a path id that is not a UUID.", ErrorCode.INVALID_REQUEST),
                "401": _error("no valid session or token.", ErrorCode.UNAUTHORIZED),
                "404": _error("no such submission for this user.", ErrorCode.NOT_FOUND),
                "405": _error("the stream answers GET (and HEAD) only.", ErrorCode.METHOD_NOT_ALLOWED),
                "429": _error("too many open streams (retryable).", ErrorCode.RATE_LIMITED),
            },
        }
    }
    return result
