"""Cookie-authenticated websockets only from the site's own origin (a page elsewhere cannot read a chat)."""

import pytest

from devtools.stack import free_port
from tests.client import history, post_message, socket_url, token_of
from tests.security.handshake import first_message, open_socket, session_cookie


@pytest.fixture
def conversation_id(api):
    post_message(api, "secret plans")
    return history(api)["conversationId"]


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:{other_port}", "http://evil.example", "null", "https://127.0.0.1:{port}", None],
    ids=["another-port-of-the-same-host", "another-site", "null", "another-scheme", "no-origin"],
)
def test_a_session_socket_from_anywhere_but_the_site_itself_is_refused(shared_web, conversation_id, user, origin):
    port = shared_web.rsplit(":", 1)[1]
    headers = {"Cookie": session_cookie(shared_web, user)}
    if origin is not None:
        headers["Origin"] = origin.format(other_port=free_port(), port=port)

    handshake = open_socket(socket_url(shared_web, conversation_id), headers)
    handshake.close()

    assert handshake.status_line.startswith("HTTP/1.1 403"), handshake.status_line


def test_a_session_socket_from_the_sites_own_origin_reads_the_conversation(shared_web, conversation_id, user):
    headers = {"Cookie": session_cookie(shared_web, user), "Origin": shared_web}

    handshake = open_socket(socket_url(shared_web, conversation_id), headers)
    try:
        assert handshake.status_line.startswith("HTTP/1.1 101"), handshake.status_line
        event = first_message(handshake)
    finally:
        handshake.close()

    assert event["type"] == "submission.accepted"
    assert event["payload"]["userMessage"]["text"] == "secret plans"


def test_a_token_socket_without_an_origin_is_accepted_like_a_native_app(shared_web, conversation_id, user):
    token = token_of(user)

    handshake = open_socket(socket_url(shared_web, conversation_id), {"Authorization": f"Bearer {token}"})
    try:
        assert handshake.status_line.startswith("HTTP/1.1 101"), handshake.status_line
        assert first_message(handshake)["seq"] == 1
    finally:
        handshake.close()
