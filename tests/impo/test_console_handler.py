"""The console handler writes to the stderr of the moment: a summary written from its own thread after the stderr it
was configured with had been closed (a test runner's capture) failed with "I/O operation on closed file"."""

import io
import logging
import sys

from core.log_levels import ConsoleHandler


def test_a_line_goes_to_the_stderr_of_the_moment_after_the_first_was_closed(monkeypatch):
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logger = logging.getLogger("tests.console_handler")
    handler = ConsoleHandler()
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "propagate", False)
    try:
        logger.warning("to the first")
        first_text = first.getvalue()
        first.close()
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)

        logger.warning("to the second")
    finally:
        logger.removeHandler(handler)

    assert first_text == "to the first\n"
    assert second.getvalue() == "to the second\n"
