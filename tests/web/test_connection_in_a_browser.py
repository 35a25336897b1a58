"""An idle page keeps one websocket: no reconnects, no history reloads, no traceback in the server's log."""

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.web.conftest import log_in

IDLE_SECONDS = 30


def test_an_idle_socket_stays_open_for_30_seconds_without_a_reconnect_or_a_traceback(
    stack, site, user
):  # its own web server, whose log it reads
    page = site.new_page()
    sockets = []
    history_reads = []
    page.on("websocket", lambda socket: sockets.append(socket))
    page.on("request", lambda request: "/api/v1/conversation?" in request.url and history_reads.append(request.url))
    log_in(page, user)
    assert len(sockets) == 1 and len(history_reads) == 1

    # Idle for the whole window: waiting for any sign of a dropped socket must time out.
    with pytest.raises(PlaywrightTimeout):
        page.wait_for_function(
            "() => document.getElementById('connection').dataset.state !== 'live'", timeout=IDLE_SECONDS * 1000
        )

    assert len(sockets) == 1
    assert not sockets[0].is_closed()
    assert len(history_reads) == 1
    [web] = [process for process in stack.processes if process.name == "web"]
    assert "Traceback" not in web.log_text()
