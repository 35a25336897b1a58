"""The processes' logging (Django's LOGGING, docs/operations.md "Logs").

A client's mistake is not the server's: Django logs every 4xx answer (`django.request`) as a WARNING, a failed
CSRF check (`django.security.csrf`) too, and a suspicious request answered 400 (a Host header not in ALLOWED_HOSTS,
`django.security.DisallowedHost`, what every scanner of an address sends) as an ERROR with the traceback of Django's
own check. That buried the lines an operator needs (a failed run, a worker that lost its lease). The console
handler writes them all at INFO, the last without its traceback (its message says what was refused); 5xx stay
ERROR."""

import logging
import sys


class ConsoleHandler(logging.StreamHandler):
    """Writes to the stderr of the moment, not the one there was when logging was configured: a process that swaps
    stderr (a test runner capturing each test's output) closes the old one, and a summary written later from the
    summaries' own thread (core/log_summaries.py) then failed with "I/O operation on closed file"."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _stream):
        pass  # always the current stderr


class ClientErrorsAtInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if not (isinstance(status, int) and 400 <= status < 500):
            return True
        if record.name == "django.request" or record.name.startswith("django.security."):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = record.exc_text = None
        return True


def logging_config(level: str, *, summary_seconds: float) -> dict:
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
        # No token or Authorization value reaches a log (core/log_redaction.py); a client's 4xx is INFO.
        "filters": {
            "secrets": {"()": "core.log_redaction.SecretRedaction"},
            "client_errors_at_info": {"()": "core.log_levels.ClientErrorsAtInfo"},
            "repeated_refusals": {"()": "core.log_summaries.RepeatedRefusals", "interval": summary_seconds},
        },
        "handlers": {
            "console": {
                "class": "core.log_levels.ConsoleHandler",
                "formatter": "plain",
                "filters": ["secrets", "client_errors_at_info"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # A line per provider request (hundreds a second from a busy worker) says nothing a span does not.
            # httpx's line would also name a URL a user gave (a push endpoint is a capability: whoever holds it can
            # wake the browser).
            "httpx2": {"level": "WARNING"},
            "httpx": {"level": "WARNING"},
            # A client repeating a 401 or a 429 costs a line and a summary per interval, not a line per request.
            "django.request": {"filters": ["repeated_refusals"]},
            # Named without handlers, Django's own are removed: with DEBUG its console handler wrote every error a
            # second time, with its traceback, past the filters above (a client's 4xx at ERROR, tokens unredacted).
            "django": {},
        },
    }
