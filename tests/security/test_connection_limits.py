"""Per-user caps on concurrently open websockets and SSE streams."""

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from devtools.stack import start_web, wait_until
from impo.asgi import application
from runtime.realtime.consumers import RATE_LIMITED_CLOSE_CODE
from tests.client import bearer, send_message, socket_path, token_of


def main_conversation(api) -> str:
    return api.get("/api/v1/conversation").json()["conversationId"]


def open_sockets(user, conversation_id, count: int) -> list[dict]:
    """Opens `count` sockets one after another and reports how each was answered, closing them all."""
    path = socket_path(conversation_id, token_of(user))

    async def scenario():
        outcomes, communicators = [], []
        for _ in range(count):
            communicator = WebsocketCommunicator(application, path)
            connected, _ = await communicator.connect()
            communicators.append(communicator)
            # A conversation without events sends nothing on connecting; a refused socket sends its close.
            quiet = not connected or await communicator.receive_nothing(timeout=1)
            outcomes.append({"connected": connected, "close": None if quiet else await communicator.receive_output()})
        for communicator in communicators:
            await communicator.disconnect()
        return outcomes

    return async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_a_socket_beyond_the_users_cap_is_closed_as_rate_limited(user, api, settings):
    settings.IMPO_LIMIT_WEBSOCKETS = 1

    first, second = open_sockets(user, main_conversation(api), 2)

    assert first["connected"] is True
    assert second["close"] == {
        "type": "websocket.close",
        "code": RATE_LIMITED_CLOSE_CODE,
        "reason": "More than 1 open websockets.",
    }


@pytest.mark.django_db(transaction=True)
def test_closing_a_socket_frees_its_place(user, api, settings):
    settings.IMPO_LIMIT_WEBSOCKETS = 1
    conversation_id = main_conversation(api)
    open_sockets(user, conversation_id, 1)

    [again] = open_sockets(user, conversation_id, 1)

    assert again["connected"] is True


@pytest.mark.django_db(transaction=True)
def test_another_users_sockets_do_not_count_against_the_cap(user, other_user, api, other_api, settings):
    settings.IMPO_LIMIT_WEBSOCKETS = 1
    conversation_id = main_conversation(api)
    other_conversation_id = main_conversation(other_api)

    mine_path = socket_path(conversation_id, token_of(user))
    theirs_path = socket_path(other_conversation_id, token_of(other_user))

    async def hold_one_and_open_anothers():
        mine = WebsocketCommunicator(application, mine_path)
        theirs = WebsocketCommunicator(application, theirs_path)
        assert (await mine.connect())[0]
        connected, _ = await theirs.connect()
        silent = await theirs.receive_nothing(timeout=0.5)
        await mine.disconnect()
        await theirs.disconnect()
        return connected and silent

    assert async_to_sync(hold_one_and_open_anothers)() is True


def test_a_stream_beyond_the_users_cap_is_429_and_a_closed_one_frees_its_place(stack, api, user):
    stack.env["IMPO_LIMIT_STREAMS"] = "1"
    _, web = start_web(stack)
    receipt = send_message(api, "no worker: stays queued", client_message_id="m-1").json()
    url = f"{web}/api/v1/submissions/{receipt['submissionId']}/stream"
    headers = bearer(token_of(user))

    with httpx.stream("GET", url, headers=headers, timeout=30) as held:
        assert held.status_code == 200
        lines = held.iter_lines()  # kept: a dropped line iterator closes the connection
        next(lines)
        refused = httpx.get(url, headers=headers, timeout=30)

    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    wait_until(lambda: _stream_opens(url, headers), timeout=15, what="the closed stream's place to be free again")


def _stream_opens(url: str, headers: dict) -> bool:
    with httpx.stream("GET", url, headers=headers, timeout=30) as response:
        return response.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_sockets_are_not_refused_when_the_limit_store_is_unreachable(user, api, settings):
    settings.IMPO_LIMIT_WEBSOCKETS = 1
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # only the limits read it per call; the channel layer keeps its own

    outcomes = open_sockets(user, main_conversation(api), 2)

    assert outcomes == [{"connected": True, "close": None}, {"connected": True, "close": None}]
