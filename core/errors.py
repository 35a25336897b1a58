"""ICA v1 errors: every failure leaves as `{"error": {code, message, retryable}, "requestId"}`."""

import logging
import math

from django.core.exceptions import DisallowedHost
from django.db import DatabaseError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.middleware import request_id_for

logger = logging.getLogger(__name__)

# What a 401 tells the client to present, on every transport that can answer 401.
WWW_AUTHENTICATE = 'Bearer realm="api"'


class ApplicationError(Exception):
    """A refusal the client can act on; services raise it, the API boundary renders it."""

    code = ErrorCode.INVALID_REQUEST
    retry_after: int | None = None  # seconds, sent as `Retry-After`

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
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
        # The status and, unless this refusal says otherwise, the retryable flag are the code's.
        self.status = self.code.status
        self.retryable = self.code.retryable if retryable is None else retryable


class InvalidRequest(ApplicationError):
    code = ErrorCode.INVALID_REQUEST


class NotFound(ApplicationError):
    """Also what another user's object looks like: existence is never revealed."""

    code = ErrorCode.NOT_FOUND

    def __init__(self, message: str = "Not found."):
        super().__init__(message)


class Conflict(ApplicationError):
    """A 409; its code (one of the catalogue's 409s) names the conflict."""


class Gone(ApplicationError):
    """A 410; its code (one of the catalogue's 410s) names what ended."""


class RateLimited(ApplicationError):
    code = ErrorCode.RATE_LIMITED


class RequestTooLarge(ApplicationError):
    code = ErrorCode.REQUEST_TOO_LARGE


class RequestTimeout(ApplicationError):
    """A request body that did not arrive in time (IMPO_WEB_BODY_SECONDS); the client may send it again."""

    code = ErrorCode.REQUEST_TIMEOUT


class ServiceUnavailable(ApplicationError):
    code = ErrorCode.SERVICE_UNAVAILABLE


def error_body(request, code: ErrorCode, message: str, retryable: bool | None = None) -> dict:
    """The ICA error body; `retryable` is the code's unless this answer says otherwise."""
    return error_envelope(request_id_for(request), code, message, retryable)


def error_envelope(request_id: str, code: ErrorCode, message: str, retryable: bool | None = None) -> dict:
    """The ICA error body; `error_body` for a Django request, this where there is none yet (the server's edge)."""
    retryable = code.retryable if retryable is None else retryable
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


def refused_fields(detail, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> ApplicationError:
    """A refused body: the first message as `field: message` (what clients always read), and every field's in
    `fields`, so a form can mark all of them at once; `code` where a route names its refusals otherwise."""
    messages = _validation_messages(detail) or {"": "Invalid request."}
    path, message = next(iter(messages.items()))
    return ApplicationError(f"{path}: {message}" if path else message, code=code, details={"fields": messages})


def _validation_error(request, detail) -> dict:
    refusal = refused_fields(detail)
    body = error_body(request, refusal.code, refusal.message)
    body["error"].update(refusal.details)
    return body


_DRF_CODES = {
    drf_exceptions.NotAuthenticated: ErrorCode.UNAUTHORIZED,
    drf_exceptions.AuthenticationFailed: ErrorCode.UNAUTHORIZED,
    drf_exceptions.PermissionDenied: ErrorCode.FORBIDDEN,
    drf_exceptions.NotFound: ErrorCode.NOT_FOUND,
    drf_exceptions.MethodNotAllowed: ErrorCode.METHOD_NOT_ALLOWED,
    drf_exceptions.NotAcceptable: ErrorCode.NOT_ACCEPTABLE,
    drf_exceptions.UnsupportedMediaType: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    drf_exceptions.Throttled: ErrorCode.RATE_LIMITED,
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


def error_response(request, code: ErrorCode, message: str) -> JsonResponse:
    """The ICA error answer of a view outside DRF, with the code's status."""
    return JsonResponse(error_body(request, code, message), status=code.status)


def ica_exception_handler(exc, context):
    request = context["request"]
    if isinstance(exc, ApplicationError):
        return _application_error(Response, request, exc)
    if isinstance(exc, drf_exceptions.ValidationError):
        return Response(_validation_error(request, exc.detail), status=400)
    if isinstance(exc, drf_exceptions.ParseError):
        return Response(error_body(request, ErrorCode.INVALID_REQUEST, str(exc.detail)), status=400)
    if isinstance(exc, Http404):
        return Response(error_body(request, ErrorCode.NOT_FOUND, "Not found."), status=404)
    for exc_class, code in _DRF_CODES.items():
        if isinstance(exc, exc_class):
            response = Response(error_body(request, code, str(exc.detail)), status=code.status)
            if code == ErrorCode.UNAUTHORIZED:
                response["WWW-Authenticate"] = WWW_AUTHENTICATE
            return response
    if isinstance(exc, DatabaseError):
        # Nothing was saved (the transaction rolled back), so retrying the same command is safe.
        logger.exception("database failure while handling %s", request.path)
        code = ErrorCode.SERVICE_UNAVAILABLE
        return Response(error_body(request, code, "The service could not save this request."), status=code.status)
    return None


def unauthorized(request) -> JsonResponse:
    """The 401 of a view outside DRF (the SSE stream), the same as DRF's: ICA body and the challenge."""
    response = error_response(request, ErrorCode.UNAUTHORIZED, "Authentication required.")
    response["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


def json_not_found(request, exception=None):
    return error_response(request, ErrorCode.NOT_FOUND, "Not found.")


def json_server_error(request):
    return error_response(request, ErrorCode.INTERNAL_ERROR, "Internal error.")


def json_bad_request(request, exception=None):
    if isinstance(exception, DisallowedHost):
        return error_response(request, ErrorCode.HOST_NOT_ALLOWED, "This server does not serve the host named.")
    return error_response(request, ErrorCode.INVALID_REQUEST, "Bad request.")


def json_csrf_failure(request, reason=""):
    return error_response(request, ErrorCode.FORBIDDEN, f"CSRF check failed: {reason}")
