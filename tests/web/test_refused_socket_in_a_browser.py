"""A page whose socket the server refuses (4429, one socket per user here) says why, backs off, and connects
once a place is free."""

import time

import pytest

from tests.web.conftest import log_in

REFUSED_WATCH_SECONDS = 10


@pytest.fixture
def stack(stack):
    """One socket per user, so a second page is refused (4429): a stack of its own, which the test asks for by name
    (the shared stack's web server keeps the default limit)."""
    stack.env["IMPO_LIMIT_WEBSOCKETS"] = "1"
    return stack


def test_a_refused_socket_says_why_backs_off_and_connects_once_a_place_is_free(stack, site, user):
    first = site.new_page()
    log_in(first, user)
    second = site.new_page()
    attempts = []
    second.on("websocket", lambda socket: attempts.append(time.monotonic()))

    log_in(second, user, wait_for_chat=False)
    indicator = second.wait_for_selector("#connection[data-state=refused]")
    assert "More than 1 open websockets." in indicator.text_content()
    assert "Retrying in" in indicator.text_content()
    second.wait_for_timeout(REFUSED_WATCH_SECONDS * 1000)  # watching how often it tries, not waiting for a state

    tries = len(attempts)
    first.close()
    second.wait_for_selector("#connection[data-state=live]", timeout=90_000)
    print(f"\nrefused page: {tries} socket attempts in its first {REFUSED_WATCH_SECONDS} s")
    # Refused sockets wait at least 5 s (2.5-5 s with jitter, then longer): not one try every half second.
    assert tries <= 4
