"""Slow clients cannot hold the web port: headers and bodies have deadlines (a late body is 408 `request_timeout`),
idle kept-alive connections close, and one address holds a bounded number of connections (docs/edge.md).

The deadlines are shortened here so the tests finish quickly; the logic is the same at the defaults
(tests/impo/test_settings_that_matter.py holds those)."""

import pytest
from rest_framework.authtoken.models import Token

from devtools.stack import start_web, wait_until
from tests.impo.edge import closed_by_server, connect, read_answer, request_head

HEADER_SECONDS = 2
BODY_SECONDS = 2
KEEPALIVE_SECONDS = 1
CONNECTIONS_PER_ADDRESS = 20
SLOWLORIS_CONNECTIONS = 300


@pytest.fixture(autouse=True)
def short_deadlines(stack):
    """In the stack's environment before any of its web servers starts (autouse)."""
    stack.env["IMPO_WEB_HEADER_SECONDS"] = str(HEADER_SECONDS)
    stack.env["IMPO_WEB_BODY_SECONDS"] = str(BODY_SECONDS)
    stack.env["IMPO_WEB_KEEPALIVE_SECONDS"] = str(KEEPALIVE_SECONDS)


def web_with(stack, **env) -> str:
    """A web server with the short deadlines and `env` besides."""
    return start_web(stack, env=env)[1]


def test_a_body_that_does_not_arrive_in_time_is_answered_408_request_timeout(web, user):
    token = Token.objects.create(user=user).key
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Length": "1000"}
    with connect(web) as sock:
        sock.sendall(request_head("POST", "/api/v1/conversation/messages", headers) + b'{"text": ')
        answer = read_answer(sock, timeout=BODY_SECONDS + 30)
        closed = wait_until(lambda: closed_by_server(sock), timeout=10, what="the connection to be closed")

    assert answer.status == 408
    assert answer.json()["error"] == {
        "code": "request_timeout",
        "message": f"The request body did not arrive within {BODY_SECONDS} s.",
        "retryable": True,
    }
    assert answer.json()["requestId"] == answer.headers["x-request-id"]
    assert closed


def test_a_chunked_body_that_stops_coming_is_answered_408_too(web, user):
    token = Token.objects.create(user=user).key
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    with connect(web) as sock:
        sock.sendall(request_head("POST", "/api/v1/conversation/messages", headers) + b"2\r\n{}\r\n")
        answer = read_answer(sock, timeout=BODY_SECONDS + 30)

    assert answer.status == 408
    assert answer.json()["error"]["code"] == "request_timeout"


def test_headers_that_do_not_arrive_in_time_are_answered_408_and_the_connection_closed(web):
    with connect(web) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = read_answer(sock, timeout=HEADER_SECONDS + 30)

    assert answer.status == 408
    assert answer.json()["error"]["code"] == "request_timeout"


def test_a_slowloris_of_hundreds_of_connections_is_not_held_past_the_header_deadline(stack):
    web = web_with(stack, IMPO_WEB_CONNECTIONS_PER_ADDRESS=str(SLOWLORIS_CONNECTIONS))
    sockets = [connect(web) for _ in range(SLOWLORIS_CONNECTIONS)]
    try:
        for sock in sockets:
            sock.sendall(b"GET /health HTTP/1.1\r\n")

        def all_closed() -> bool:
            open_ones = [sock for sock in sockets if not closed_by_server(sock)]
            for sock in open_ones:
                try:
                    sock.sendall(b"X-Slow: one more line\r\n")  # the attack: a header line now and then
                except OSError:
                    continue  # closed between the check and the send
            return not open_ones

        wait_until(all_closed, timeout=HEADER_SECONDS + 30, interval=0.5, what="every slow connection to be closed")
    finally:
        for sock in sockets:
            sock.close()

    with connect(web) as sock:
        sock.sendall(request_head("GET", "/health", {}))
        assert read_answer(sock).status == 200


def test_an_idle_kept_alive_connection_is_closed(web):
    with connect(web) as sock:
        sock.sendall(request_head("GET", "/health", {}))
        assert read_answer(sock).status == 200

        assert wait_until(lambda: closed_by_server(sock), timeout=KEEPALIVE_SECONDS + 30, what="the idle close")


def test_connections_beyond_the_cap_per_address_are_refused_429_until_one_closes(stack):
    # Held connections wait out a long header deadline here: only closing one may free its place.
    web = web_with(stack, IMPO_WEB_CONNECTIONS_PER_ADDRESS=str(CONNECTIONS_PER_ADDRESS), IMPO_WEB_HEADER_SECONDS="120")
    held = [connect(web) for _ in range(CONNECTIONS_PER_ADDRESS)]
    try:
        # Each held connection has begun a request, so the server has counted it before the next one arrives.
        for sock in held:
            sock.sendall(b"GET /health HTTP/1.1\r\n")
        with connect(web) as refused:
            answer = read_answer(refused)
        held.pop().close()

        def served() -> bool:
            with connect(web) as sock:
                sock.sendall(request_head("GET", "/health", {}))
                return read_answer(sock).status == 200

        assert wait_until(served, timeout=30, what="a connection to be served again")
    finally:
        for sock in held:
            sock.close()

    assert answer.status == 429
    assert answer.json()["error"] == {
        "code": "rate_limited",
        "message": "Too many open connections from this address.",
        "retryable": True,
    }
    assert answer.headers["retry-after"] == "1"
