"""A body is a body whatever its framing: `Transfer-Encoding: chunked` is read like a body with a length, under the
same 64 KiB limit (413 as soon as it is passed, the rest never read), on every path that reads a body."""

import json
import re
import uuid
from urllib.parse import urlencode

import pytest
from django.conf import global_settings

from tests.client import bearer, token_of
from tests.factories import PASSWORD
from tests.impo.edge import LAST_CHUNK, answered_while_sending, chunk, connect, read_answer, request_head

LIMIT = 64 * 1024


def post(web, path, body: bytes, headers: dict, *, chunked: bool):
    framing = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(len(body))}
    with connect(web) as sock:
        sock.sendall(request_head("POST", path, {**headers, **framing}))
        sock.sendall(chunk(body[: len(body) // 2]) + chunk(body[len(body) // 2 :]) + LAST_CHUNK if chunked else body)
        return read_answer(sock)


def message(text="hello") -> bytes:
    return json.dumps({"clientMessageId": str(uuid.uuid4()), "text": text}).encode()


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "with a length"])
def test_a_command_is_accepted_whatever_its_framing(shared_web, user, chunked):
    answer = post(
        shared_web, "/api/v1/conversation/messages", message(), {**JSON, **bearer(token_of(user))}, chunked=chunked
    )

    assert answer.status == 202, answer.body
    assert set(answer.json()) == {"userMessageId", "replyMessageId", "messageId", "submissionId"}


def test_a_chunked_body_just_under_the_limit_is_read_whole(shared_web, user):
    body = message()
    body = body[:-2] + b'"' + b" " * (LIMIT - len(body)) + b"}"  # JSON whitespace up to the last byte allowed
    assert len(body) == LIMIT

    answer = post(shared_web, "/api/v1/conversation/messages", body, {**JSON, **bearer(token_of(user))}, chunked=True)

    assert answer.status == 202, answer.body


@pytest.mark.parametrize("megabytes", [1, 100])
def test_a_chunked_body_over_the_limit_is_refused_413_before_the_rest_is_sent(shared_web, user, megabytes):
    piece = b"x" * 65536
    with connect(shared_web) as sock:
        sock.sendall(
            request_head(
                "POST",
                "/api/v1/conversation/messages",
                {**JSON, **bearer(token_of(user)), "Transfer-Encoding": "chunked"},
            )
        )
        answer, sent = answered_while_sending(sock, (chunk(piece) for _ in range(megabytes * 16)))

    assert answer.status == 413
    assert answer.json()["error"] == {
        "code": "request_too_large",
        "message": f"The request body exceeds {LIMIT} bytes.",
        "retryable": False,
    }
    assert answer.json()["requestId"] == answer.headers["x-request-id"]
    if megabytes == 100:
        assert sent < 50 * 2**20, "the server read on far past its limit"


def test_a_declared_length_over_the_limit_is_refused_413_without_waiting_for_the_body(shared_web, user):
    with connect(shared_web) as sock:
        sock.sendall(
            request_head(
                "POST",
                "/api/v1/conversation/messages",
                {**JSON, **bearer(token_of(user)), "Content-Length": str(100 * 2**20)},
            )
        )
        answer = read_answer(sock)

    assert answer.status == 413
    assert answer.json()["error"]["code"] == "request_too_large"


def test_a_device_reads_its_chunked_bodies(shared_web, user):
    registered = post(
        shared_web,
        "/api/v1/devices/register",
        json.dumps({"installationId": "phone-1", "tools": ["play_sound"]}).encode(),
        {**JSON, **bearer(token_of(user))},
        chunked=True,
    )
    assert registered.status == 200, registered.body
    result = {
        "deviceId": registered.json()["deviceId"],
        "executionId": str(uuid.uuid4()),
        "success": True,
        "output": {},
    }

    answer = post(
        shared_web,
        f"/api/v1/device-tool-invocations/{uuid.uuid4()}/result",
        json.dumps(result).encode(),
        {**JSON, **bearer(token_of(user))},
        chunked=True,
    )

    assert answer.status == 404, answer.body  # read and validated, then no such invocation: not a 400 for `{}`


def test_the_login_form_reads_a_chunked_body(shared_web, user, settings):
    # The server checks the password with the deployment's hashers, not the suite's fast one.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    user.set_password(PASSWORD)
    user.save()
    with connect(shared_web) as sock:
        sock.sendall(request_head("GET", "/login/", {}))
        page = read_answer(sock)
    cookie = re.search(r"csrftoken=([^;]+)", page.headers["set-cookie"]).group(1)
    form = urlencode({"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": cookie}).encode()

    answer = post(
        shared_web,
        "/login/",
        form,
        {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={cookie}"},
        chunked=True,
    )

    assert answer.status == 302, answer.body  # signed in and sent on
    assert "sessionid=" in answer.headers["set-cookie"]
