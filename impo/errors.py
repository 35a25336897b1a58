"""ICA v1 errors: every failure leaves as `{"error": {code, message, retryable}, "requestId"}`."""

import logging
import math

from django.db import DatabaseError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

from impo.middleware import request_id_for

logger = logging.getLogger(__name__)

# What a 401 tells the client to present, on every transport that can answer 401.
WWW_AUTHENTICATE = 'Bearer realm="api"'


class ApplicationError(Exception):
    """A refusal the client can act on; services raise it, the API boundary renders it."""

    status = 400
    code = "invalid_request"
    retryable = False
    retry_after: int | None = None  # seconds, sent as `Retry-After`

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
        details: dict | None = None,
    ):
        super().__init__(message)
        self.message = message
        # Fields the client can act on, beside code and message in the error object (e.g. activeSubmissionId).
        self.details = details or {}
        if retry_after is not None:
            self.retry_after = max(1, math.ceil(retry_after))
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if retryable is not None:
            self.retryable = retryable


class InvalidRequest(ApplicationError):
    status = 400
    code = "invalid_request"


class NotFound(ApplicationError):
    """Also what another user's object looks like: existence is never revealed."""

    status = 404
    code = "not_found"

    def __init__(self, message: str = "Not found."):
        super().__init__(message)


class Conflict(ApplicationError):
    status = 409


class Gone(ApplicationError):
    status = 410


class RateLimited(ApplicationError):
    status = 429
    code = "rate_limited"
    retryable = True


class RequestTooLarge(ApplicationError):
    status = 413
    code = "request_too_large"


class RequestTimeout(ApplicationError):
    """A request body that did not arrive in time (IMPO_WEB_BODY_SECONDS); the client may send it again."""

    status = 408
    code = "request_timeout"
    retryable = True


class ServiceUnavailable(ApplicationError):
    status = 503
    code = "service_unavailable"
    retryable = True


def error_body(request, code: str, message: str, retryable: bool = False) -> dict:
    return error_envelope(request_id_for(request), code, message, retryable)


def error_envelope(request_id: str, code: str, message: str, retryable: bool = False) -> dict:
    """The ICA error body; `error_body` for a Django request, this where there is none yet (the server's edge)."""
    return {"error": {"code": code, "message": message, "retryable": retryable}, "requestId": request_id}


def _validation_messages(detail, path: str = "") -> dict[str, str]:
    """Flattens DRF's nested validation detail to `{field path: its first message}`, in the order DRF gave them
    (a non-field error under its parent's path, "" at the top)."""
    if isinstance(detail, dict):
        messages = {}
        for key, value in detail.items():
            field = f"{path}.{key}".strip(".") if key != "non_field_errors" else path
            for found, message in _validation_messages(value, field).items():
                messages.setdefault(found, message)
        return messages
    if isinstance(detail, list):
        return _validation_messages(detail[0], path) if detail else {}
    return {path: str(detail)}


def _validation_error(request, detail) -> dict:
    """The first message as `field: message` (what clients always read), and every field's in `fields`, so a
    form can mark all of them at once."""
    messages = _validation_messages(detail) or {"": "Invalid request."}
    path, message = next(iter(messages.items()))
    body = error_body(request, "invalid_request", f"{path}: {message}" if path else message)
    body["error"]["fields"] = messages
    return body


_DRF_CODES = {
    drf_exceptions.NotAuthenticated: (401, "unauthorized"),
    drf_exceptions.AuthenticationFailed: (401, "unauthorized"),
    drf_exceptions.PermissionDenied: (403, "forbidden"),
    drf_exceptions.NotFound: (404, "not_found"),
    drf_exceptions.MethodNotAllowed: (405, "method_not_allowed"),
    drf_exceptions.NotAcceptable: (406, "not_acceptable"),
    drf_exceptions.UnsupportedMediaType: (415, "unsupported_media_type"),
    drf_exceptions.Throttled: (429, "rate_limited"),
}


def _application_error(response_class, request, exc: ApplicationError):
    body = error_body(request, exc.code, exc.message, exc.retryable)
    body["error"].update(exc.details)
    response = response_class(body, status=exc.status)
    if exc.retry_after is not None:
        response["Retry-After"] = str(exc.retry_after)
    return response


def application_error_response(request, exc: ApplicationError) -> JsonResponse:
    """An ApplicationError raised behind a view outside DRF (the SSE stream, the login form)."""
    return _application_error(JsonResponse, request, exc)


def ica_exception_handler(exc, context):
    request = context["request"]
    if isinstance(exc, ApplicationError):
        return _application_error(Response, request, exc)
    if isinstance(exc, drf_exceptions.ValidationError):
        return Response(_validation_error(request, exc.detail), status=400)
    if isinstance(exc, drf_exceptions.ParseError):
        return Response(error_body(request, "invalid_request", str(exc.detail)), status=400)
    if isinstance(exc, Http404):
        return Response(error_body(request, "not_found", "Not found."), status=404)
    for exc_class, (status, code) in _DRF_CODES.items():
        if isinstance(exc, exc_class):
            response = Response(error_body(request, code, str(exc.detail), status == 429), status=status)
            if status == 401:
                response["WWW-Authenticate"] = WWW_AUTHENTICATE
            return response
    if isinstance(exc, DatabaseError):
        # Nothing was saved (the transaction rolled back), so retrying the same command is safe.
        logger.exception("database failure while handling %s", request.path)
        return Response(
            error_body(request, "service_unavailable", "The service could not save this request.", True),
            status=503,
        )
    return None


def unauthorized(request) -> JsonResponse:
    """The 401 of a view outside DRF (the SSE stream), the same as DRF's: ICA body and the challenge."""
    response = JsonResponse(error_body(request, "unauthorized", "Authentication required."), status=401)
    response["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


def json_not_found(request, exception=None):
    return JsonResponse(error_body(request, "not_found", "Not found."), status=404)


def json_server_error(request):
    return JsonResponse(error_body(request, "internal_error", "Internal error.", True), status=500)


def json_bad_request(request, exception=None):
    return JsonResponse(error_body(request, "invalid_request", "Bad request."), status=400)


def json_csrf_failure(request, reason=""):
    return JsonResponse(error_body(request, "forbidden", f"CSRF check failed: {reason}"), status=403)
