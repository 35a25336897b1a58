"""A Redis outage leaves the lines docs/edge.md tells operators to watch: one WARNING per condition as it starts and
one as it ends, per process, and no traceback (a lost connection is what an outage is, not a bug).

Before, one 15 s stop left each worker process ~150 lines of Celery's "Error on restarting Gossip", the web
process a chained kombu traceback per unsent hint, and "live push unavailable for <conversation>" once a second
per open socket."""

import time

import httpx
import pytest
from rest_framework.authtoken.models import Token

from devtools.stack import ServiceProcess, Stack, start_web, wait_until
from devtools.websocket import WebsocketConnection
from tests.faults.instances import PrivateRedis

OUTAGE_SECONDS = 8
OPEN_SOCKETS = 4


class LogSince:
    """What a process logged after this point."""

    def __init__(self, process: ServiceProcess):
        self.process = process
        self.start = len(process.log_text())

    def text(self) -> str:
        return self.process.log_text()[self.start :]


@pytest.fixture
def redis_of_its_own():
    server = PrivateRedis()
    yield server
    server.stop()


def test_a_redis_outage_logs_one_line_as_each_condition_starts_and_one_as_it_ends(
    transactional_db, rebyte_double, redis_of_its_own, user
):
    from django.db import connection

    stack = Stack(database_name=connection.settings_dict["NAME"], double=rebyte_double, redis_url=redis_of_its_own.url)
    try:
        host = stack.start_worker("logs-host", host_processes=1)
        stack.start_sweeper()
        web, web_url = start_web(stack)
        token = Token.objects.create(user=user).key
        http = httpx.Client(base_url=web_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        sent = 0

        def post_accepted() -> str:
            nonlocal sent
            sent += 1
            response = http.post("/api/v1/conversation/messages", json={"clientMessageId": f"o-{sent}", "text": "hi"})
            assert response.status_code == 202, response.text
            return response.json()["submissionId"]

        post_accepted()
        conversation_id = http.get("/api/v1/conversation").json()["conversationId"]
        sockets_url = f"{web_url.replace('http', 'ws')}/ws/v1/conversations/{conversation_id}/?after=0&token={token}"
        sockets = [WebsocketConnection(sockets_url) for _ in range(OPEN_SOCKETS)]
        web_log, host_log = LogSince(web), LogSince(host)

        redis_of_its_own.stop()
        stopped = time.monotonic()
        during = [post_accepted() for _ in range(5)]
        wait_until(lambda: "hints cannot be sent" in web_log.text(), timeout=30, what="the web's outage line")
        wait_until(lambda: time.monotonic() - stopped >= OUTAGE_SECONDS, timeout=60, what="the outage to last")
        redis_of_its_own.start()
        after = [post_accepted() for _ in range(3)]

        def completed(submission_id: str) -> bool:
            return http.get(f"/api/v1/submissions/{submission_id}").json()["status"] == "completed"

        wait_until(lambda: all(map(completed, during + after)), timeout=120, what="every command to complete")
        wait_until(lambda: "hints are sent again" in web_log.text(), timeout=30, what="the web's recovery line")
        wait_until(lambda: "live push available again" in web_log.text(), timeout=30, what="the sockets' recovery")
        for socket in sockets:
            socket.close()
        http.close()
    finally:
        stack.stop()

    web_lines, host_lines = web_log.text(), host_log.text()
    assert "Traceback" not in web_lines, web_lines[-3000:]
    assert "Traceback" not in host_lines, host_lines[-3000:]
    assert "Gossip" not in host_lines
    assert host_lines.count("consumer: Cannot connect to") <= 1  # Celery's retries, one line for the outage
    assert "ERROR" not in host_lines and "DeprecationWarning" not in host_lines
    assert (web_lines.count("hints cannot be sent"), web_lines.count("hints are sent again")) == (1, 1)
    assert web_lines.count("admission rate not checked") <= 1
    assert web_lines.count("token cache unavailable") <= 1
    # However many sockets the process serves, and however often each retries.
    assert (web_lines.count("live push unavailable"), web_lines.count("live push available again")) == (1, 1)
    assert host_lines.count("worker heartbeat failing") == host_lines.count("worker heartbeat sent again") <= 1
    assert host_lines.count("hints cannot be sent") == host_lines.count("hints are sent again") <= 1
