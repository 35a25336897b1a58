"""Every answer under /api/ is JSON, and every refusal the ICA envelope, whatever the method, the path, the
authentication or the CSRF state: a bearer-token request is never judged by the session's CSRF rules."""

import re
import uuid

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db

UNSAFE_METHODS = ["post", "put", "patch", "delete"]
NONEXISTENT_PATHS = [
    "/api/v1/accounts",
    f"/api/v1/tasks/{uuid.uuid4()}/nothing",
    "/api/v1/nothing-here",
    "/api/v2/conversation/messages",
    "/api/",
]


def schema_paths() -> list[str]:
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    return [re.sub(r"\{[^}]+\}", lambda _: str(uuid.uuid4()), path) for path in schema["paths"]]


def callers(user) -> dict[str, Client]:
    token = Token.objects.create(user=user).key
    signed_in = Client(enforce_csrf_checks=True)
    signed_in.force_login(user)  # a session cookie and no CSRF token
    return {
        "bearer": Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token}"),
        "bearer beside a session": _with_bearer(signed_in, token),
        "session without CSRF token": signed_in,
        "anonymous": Client(enforce_csrf_checks=True),
    }


def _with_bearer(session_client: Client, token: str) -> Client:
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token}")
    client.cookies = session_client.cookies
    return client


def answers_outside_the_envelope(client: Client, paths: list[str]) -> list[str]:
    wrong = []
    for path in paths:
        for method in UNSAFE_METHODS:
            response = getattr(client, method)(path, data="", content_type="application/json")
            what = f"{method.upper()} {path} -> {response.status_code} {response.get('Content-Type')}"
            if not response.get("Content-Type", "").startswith("application/json"):
                wrong.append(what)
            elif response.status_code >= 400:
                body = response.json()
                error = body.get("error", {})
                if set(error) < {"code", "message", "retryable"} or body.get("requestId") != response["X-Request-Id"]:
                    wrong.append(f"{what} {body}")
    return wrong


@pytest.mark.parametrize("caller", ["bearer", "bearer beside a session", "session without CSRF token", "anonymous"])
def test_unsafe_methods_on_every_api_path_answer_the_envelope(user, caller):
    paths = schema_paths()
    assert len(paths) > 10

    assert answers_outside_the_envelope(callers(user)[caller], paths + NONEXISTENT_PATHS) == []


def test_a_bearer_request_to_a_path_without_a_route_is_404_not_a_csrf_refusal(user):
    client = callers(user)["bearer beside a session"]

    response = client.delete("/api/v1/no-such-route")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_bearer_request_with_the_wrong_method_on_the_stream_is_405(user):
    client = callers(user)["bearer"]

    response = client.post(f"/api/v1/submissions/{uuid.uuid4()}/stream")

    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_session_request_without_its_csrf_token_is_refused_in_the_envelope(user):
    client = callers(user)["session without CSRF token"]

    response = client.delete("/api/v1/no-such-route")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
