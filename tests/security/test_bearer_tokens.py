"""One bearer-token resolver behind the REST API, the SSE stream and the websocket."""

import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from impo.asgi import application
from tests.client import token_of

pytestmark = pytest.mark.django_db(transaction=True)


def stream_url() -> str:
    return f"/api/v1/submissions/{uuid.uuid4()}/stream"


def assert_bearer_challenge(response):
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.json()["requestId"] == response["X-Request-Id"]


def test_an_api_request_with_an_unknown_token_is_401_with_a_bearer_challenge():
    assert_bearer_challenge(Client().get("/api/v1/tasks", headers={"Authorization": "Bearer not-a-token"}))


def test_a_stream_request_without_credentials_is_401_with_a_bearer_challenge():
    assert_bearer_challenge(Client().get(stream_url()))


def test_a_stream_request_with_an_unknown_token_is_401_even_beside_a_valid_session(user):
    client = Client()
    client.force_login(user)

    assert_bearer_challenge(client.get(stream_url(), headers={"Authorization": "Bearer not-a-token"}))


def test_an_inactive_users_token_is_refused_by_the_api_the_stream_and_the_websocket(user, api):
    conversation_id = api.get("/api/v1/conversation").json()["conversationId"]
    token = token_of(user)
    user.is_active = False
    user.save()
    headers = {"Authorization": f"Bearer {token}"}

    async def websocket_connects() -> bool:
        communicator = WebsocketCommunicator(application, f"/ws/v1/conversations/{conversation_id}/?token={token}")
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert_bearer_challenge(Client().get("/api/v1/tasks", headers=headers))
    assert_bearer_challenge(Client().get(stream_url(), headers=headers))
    assert async_to_sync(websocket_connects)() is False
