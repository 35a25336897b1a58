"""A flood of 401s, 429s or refused sockets leaves its first line and a summary per interval in the web process's
log, not a line per request, and the summary is written when the flood stops, with no request after it; any other
4xx is one INFO line. Read from a real web process's output, as an operator reads it."""

import logging
import re
import uuid

import httpx
import pytest
from django.test import RequestFactory
from rest_framework.authtoken.models import Token

from core.log_summaries import RepeatedRefusals
from devtools.stack import start_web, wait_until
from tests.impo.test_clean_start_and_stop import trouble
from tests.security.handshake import open_socket

FLOOD = 60
SOCKETS = 20
SUMMARY_SECONDS = 2
SUMMARY = re.compile(r"INFO impo\.client_errors (\d+) more (\d+) answers to (.+?) on (.+?) in the last")


def summaries(log: str, status: int) -> list[tuple[int, str, str]]:
    return [(int(count), client, route) for count, code, client, route in SUMMARY.findall(log) if int(code) == status]


def summarised(process, status: int, held_back: int) -> tuple[str, set[tuple[str, str]]]:
    """Waits, asking nothing more, until the process's own timer has written summaries of `held_back` answers; returns
    the log and the (client, route) pairs summarised, checking there was a line per interval at most (however slow
    the machine, far fewer than the answers)."""
    wait_until(
        lambda: sum(count for count, _, _ in summaries(process.log_text(), status)) == held_back,
        timeout=60,
        what=f"the {status} summary (log: {process.log_path})",
    )
    log = process.log_text()
    lines = summaries(log, status)
    assert len(lines) <= (held_back + 1) // 4
    return log, {(client, route) for _, client, route in lines}


@pytest.fixture
def summarising_web(stack):
    """One web process (its counts are its own), summarising every SUMMARY_SECONDS, at most 3 admissions a minute."""
    env = {"IMPO_LOG_SUMMARY_SECONDS": str(SUMMARY_SECONDS), "IMPO_LIMIT_ADMISSIONS_PER_MINUTE": "3"}
    return start_web(stack, env=env)


def test_a_flood_of_401s_is_one_line_and_a_summary_written_after_it(summarising_web):
    process, url = summarising_web
    secret = "f1c0ffee" * 5
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {secret}"}) as http:
        for _ in range(FLOOD):
            assert http.get("/api/v1/tasks", params={"token": secret}).status_code == 401

    log, summarised_pairs = summarised(process, 401, FLOOD - 1)
    assert summarised_pairs == {("address 127.0.0.1", "api/v1/tasks")}
    assert log.count("Unauthorized: /api/v1/tasks") == 1
    assert "INFO django.request Unauthorized: /api/v1/tasks" in log
    assert secret not in log


def test_a_web_process_stopping_mid_interval_writes_its_summary_as_it_exits(stack):
    process, url = start_web(stack, env={"IMPO_LOG_SUMMARY_SECONDS": "3600"})
    for _ in range(10):
        assert httpx.get(f"{url}/api/v1/tasks", timeout=30).status_code == 401

    process.stop(timeout=60)
    assert summaries(process.log_text(), 401) == [(9, "address 127.0.0.1", "api/v1/tasks")]


def test_a_flood_of_429s_is_summarised_per_user_and_route(summarising_web, user):
    process, url = summarising_web
    token = Token.objects.create(user=user).key
    statuses = []
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        for number in range(FLOOD):
            body = {"clientMessageId": f"flood-{number}", "text": "hi"}
            statuses.append(http.post("/api/v1/conversation/messages", json=body).status_code)
    refused = statuses.count(429)
    assert statuses.count(202) == 3 and refused == FLOOD - 3

    log, summarised_pairs = summarised(process, 429, refused - 1)
    assert summarised_pairs == {(f"user {user.pk}", "api/v1/conversation/messages")}
    assert log.count("Too Many Requests: /api/v1/conversation/messages") == 1
    assert token not in log


def test_sockets_refused_for_a_bad_token_are_summarised_without_the_token(summarising_web):
    process, url = summarising_web
    secret = "feedface" * 5
    socket_url = url.replace("http", "ws") + f"/ws/v1/conversations/{uuid.uuid4()}/?after=0&token={secret}"
    for _ in range(SOCKETS):
        handshake = open_socket(socket_url, {})
        assert " 403 " in handshake.status_line
        handshake.close()

    log, summarised_pairs = summarised(process, 403, SOCKETS - 1)
    assert summarised_pairs == {("address 127.0.0.1", "websocket /ws/v1/conversations/<id>/")}
    assert log.count('"WebSocket /ws/v1/conversations/') == 1
    assert "connection rejected" not in log
    assert secret not in log


def test_a_404_a_failed_csrf_check_and_a_foreign_host_are_one_info_line_each(summarising_web):
    process, url = summarising_web
    for _ in range(3):
        assert httpx.get(f"{url}/api/v1/no-such-route", timeout=30).status_code == 404
    for _ in range(2):  # a form posted without its CSRF token
        assert httpx.post(f"{url}/login/", data={"username": "x"}, timeout=30).status_code == 403
    # A scanner's Host header: Django's check answers 400 and logged an ERROR with a traceback.
    assert httpx.get(f"{url}/api/v1/tasks", headers={"Host": "scanner.example"}, timeout=30).status_code == 400

    log = process.log_text()
    assert log.count("INFO django.request Not Found: /api/v1/no-such-route") == 3
    assert log.count("INFO django.security.csrf Forbidden (CSRF cookie not set.): /login/") == 2
    assert log.count("INFO django.security.DisallowedHost Invalid HTTP_HOST header: 'scanner.example'") == 1
    assert trouble(log) == []


def test_past_its_bound_the_filter_counts_every_other_client_together(caplog):
    """A flood from many addresses costs a bounded number of lines and keys: here 2 keys, then one more line."""
    refusals = RepeatedRefusals(interval=3600, max_keys=2)
    factory = RequestFactory()
    written = 0
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"):
        for _ in range(3):
            request = factory.get("/api/v1/tasks", REMOTE_ADDR=address)
            record = logging.makeLogRecord({"name": "django.request", "status_code": 401, "request": request})
            written += refusals.filter(record)
    assert written == 2

    caplog.set_level(logging.INFO, logger="impo.client_errors")
    refusals.flush()
    lines = [record.getMessage() for record in caplog.records if record.name == "impo.client_errors"]
    assert lines == [
        "2 more 401 answers to address 10.0.0.1 on an unrouted path in the last 3600 s (authentication failed)",
        "2 more 401 answers to address 10.0.0.2 on an unrouted path in the last 3600 s (authentication failed)",
        "9 more 401 answers to other clients on any route in the last 3600 s (authentication failed)",
    ]

    # A key with nothing held back over an interval is forgotten: its next refusal is written again.
    refusals.flush()
    request = factory.get("/api/v1/tasks", REMOTE_ADDR="10.0.0.9")
    assert refusals.filter(logging.makeLogRecord({"name": "django.request", "status_code": 401, "request": request}))
