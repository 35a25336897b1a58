"""A client's mistake is not the server's: Django logs every 4xx answer (`django.request`) as a WARNING, which
buried the lines an operator needs (a failed run, a worker that lost its lease) under every 404 and 401. The
console handler writes those at INFO; 5xx stay ERROR."""

import logging


class ClientErrorsAtInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.name == "django.request" and isinstance(status, int) and 400 <= status < 500:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True
