"""The double's one refusal type, which every module that validates raises and the HTTP layer answers."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the HTTP layer answers as `{"error": {message, type, code, param}}`."""

    def __init__(self, status: int, code: str, message: str, error_type: str = "invalid_request_error", param=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.error_type = error_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.error_type, "code": self.code, "param": self.param}}
