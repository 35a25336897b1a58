"""Django's line for each 4xx answer is written at INFO by the console handler (a client's mistake is not the
server's); a 5xx stays an ERROR."""

import logging

import pytest

from core.log_levels import ClientErrorsAtInfo

pytestmark = pytest.mark.django_db


def console_handler() -> logging.Handler:
    return next(
        handler
        for handler in logging.getLogger().handlers
        if any(isinstance(f, ClientErrorsAtInfo) for f in getattr(handler, "filters", []))
    )


def test_a_404_and_a_400_are_written_at_info(api, caplog):
    caplog.set_level(logging.INFO, logger="django.request")
    assert api.get("/api/v1/no-such-route").status_code == 404
    assert api.get("/api/v1/tasks", {"sort": "title"}).status_code == 400

    records = [record for record in caplog.records if record.name == "django.request"]
    assert [record.status_code for record in records] == [404, 400]
    for record in records:
        assert console_handler().filter(record)
        assert (record.levelno, record.levelname) == (logging.INFO, "INFO")


def test_a_server_error_stays_an_error():
    record = logging.makeLogRecord(
        {"name": "django.request", "levelno": logging.ERROR, "levelname": "ERROR", "status_code": 500}
    )

    assert console_handler().filter(record)
    assert record.levelname == "ERROR"
