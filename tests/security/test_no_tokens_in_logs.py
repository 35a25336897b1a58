"""No API token reaches a log: the web server logs each socket's path with its query string (where native apps
carry their token) and, when its access log is on, each request's; both are redacted (docs/operations.md "Security")."""

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from devtools.stack import start_web, wait_until
from tests.client import bearer, socket_url, token_of
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_the_web_and_worker_logs_hold_no_token_minted_in_the_session(stack):
    stack.env["IMPO_LIMIT_WEBSOCKETS"] = "1"
    worker = stack.start_worker()
    # The access log on, as a deployment may run it: every request line, query string included.
    web, web_url = start_web(stack, env={"GUNICORN_CMD_ARGS": "--access-logfile -"})
    owner, stranger = UserFactory.create_batch(2)
    minted = [token_of(owner), token_of(stranger)]
    token, strangers_token = minted
    conversation_id = httpx.get(f"{web_url}/api/v1/conversation", headers=bearer(token), timeout=30).json()[
        "conversationId"
    ]

    with connect(socket_url(web_url, conversation_id, token), open_timeout=20) as accepted:
        # Refused after its accept (one socket per user here): 4429.
        with (
            connect(socket_url(web_url, conversation_id, token), open_timeout=20) as refused,
            pytest.raises(ConnectionClosed),
        ):
            refused.recv(timeout=20)
        # Refused at the handshake: someone else's conversation.
        with pytest.raises(InvalidStatus):
            connect(socket_url(web_url, conversation_id, strangers_token), open_timeout=20)
        response = httpx.post(
            f"{web_url}/api/v1/conversation/messages?token={token}",
            json={"clientMessageId": "m-1", "text": "hello"},
            headers=bearer(token),
            timeout=30,
        )
        assert response.status_code == 400  # an unknown query parameter
        response = httpx.post(
            f"{web_url}/api/v1/conversation/messages",
            json={"clientMessageId": "m-1", "text": "hello"},
            headers=bearer(token),
            timeout=30,
        )
        assert response.status_code == 202
        wait_until(
            lambda: '"run.completed"' in accepted.recv(timeout=30), timeout=60, what="the run to complete on the socket"
        )
    httpx.get(f"{web_url}/api/v1/conversation", headers={"Authorization": "Token not-a-real-one"}, timeout=30)

    logs = {"web": web.log_text(), "worker": worker.log_text()}
    assert "token=[redacted]" in logs["web"]  # the lines that carried them were written
    assert '"POST /api/v1/conversation/messages?token=[redacted] HTTP/1.1" 400' in logs["web"]
    leaked = [(name, key) for name, text in logs.items() for key in minted if key in text]
    assert leaked == []
