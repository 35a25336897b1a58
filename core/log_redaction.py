"""No credential reaches a log: API tokens in a query string (`?token=`, how a websocket carries one) and
`Authorization` values are replaced by `[redacted]` in every record of the web server's and Django's loggers.

Sockets keep their token in the URL (the native apps' contract, docs/operations.md "Security"), and uvicorn writes each
socket's path with its query string to its log; the web server adds `SecretRedaction` to those loggers and
Django's console handler carries it for everything else.
"""

import logging
import re

REDACTED = "[redacted]"

_SECRETS = (
    # A query parameter naming a token, e.g. `?after=0&token=7845...` (also URL-encoded within a longer value).
    re.compile(r"(?i)((?:^|[?&;\s\"']|%26|%3f)(?:token|access_token)(?:=|%3d))[^&;\s\"'#]+"),
    # A header value, e.g. `Authorization: Bearer 7845...` or `('authorization', 'Token 7845...')`.
    re.compile(r"(?i)(authorization['\"]?\s*[:=,]\s*b?['\"]?(?:(?:bearer|token|basic)\s+)?)[^\s'\",;)]+"),
)


def redact(text: str) -> str:
    for pattern in _SECRETS:
        text = pattern.sub(lambda match: match.group(1) + REDACTED, text)
    return text


def _redacted(value):
    return redact(value) if isinstance(value, str) else value


class SecretRedaction(logging.Filter):
    """Redacts the message and each string argument in place (formatters that unpack the arguments still work)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(value) for value in record.args)
        elif isinstance(record.args, dict):
            record.args = {name: _redacted(value) for name, value in record.args.items()}
        return True


WEB_SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access", "gunicorn.error", "gunicorn.access")


def install_on_web_server_loggers() -> None:
    """uvicorn's and gunicorn's loggers write through their own handlers (they do not propagate to Django's)."""
    for name in WEB_SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, SecretRedaction) for existing in logger.filters):
            logger.addFilter(SecretRedaction())
