"""The conversation websocket against the real consumer, real Redis channel layer and real PostgreSQL."""

import threading

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection, transaction

from devtools.stack import free_port
from impo.asgi import application
from runtime.events import append_events
from runtime.models import EventType
from tests.client import send_message, socket_path, token_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(api):
    send_message(api, "hi", client_message_id="m-1")
    return api.get("/api/v1/conversation").json()["conversationId"]


def write_events(conversation_id, count):
    for index in range(count):
        with transaction.atomic():
            append_events(conversation_id, None, [(EventType.TEXT_DELTA, {"delta": f"{index} "})])


async def receive_through(communicator, last_seq, seen):
    while not seen or seen[-1] < last_seq:
        seen.append((await communicator.receive_json_from(timeout=10))["seq"])
    return seen


def test_replay_then_live_has_no_gap_and_no_duplicate_under_a_concurrent_writer(user, conversation):
    writes = 150
    total = 1 + writes  # the accepted message's event, then the writer's

    def writer():
        try:
            write_events(conversation, writes)
        finally:
            connection.close()

    path = socket_path(conversation, token_of(user))

    async def scenario():
        thread = threading.Thread(target=writer)
        thread.start()
        communicator = WebsocketCommunicator(application, path)
        connected, _ = await communicator.connect()
        assert connected
        seen = await receive_through(communicator, total, [])
        thread.join()
        await communicator.disconnect()
        return seen

    assert async_to_sync(scenario)() == list(range(1, total + 1))


def test_a_reconnect_after_a_seq_receives_each_missing_event_exactly_once(user, conversation):
    path = f"/ws/v1/conversations/{conversation}/?token={token_of(user)}&after="

    async def first_visit():
        communicator = WebsocketCommunicator(application, path + "0")
        assert (await communicator.connect())[0]
        seen = await receive_through(communicator, 1, [])
        await communicator.disconnect()
        return seen

    async def second_visit(after):
        communicator = WebsocketCommunicator(application, path + str(after))
        assert (await communicator.connect())[0]
        seen = await receive_through(communicator, 21, [])
        await communicator.disconnect()
        return seen

    before = async_to_sync(first_visit)()
    write_events(conversation, 20)  # committed while the client was away
    after = async_to_sync(second_visit)(before[-1])

    assert before == [1]
    assert after == list(range(2, 22))


def test_another_users_socket_is_refused(other_user, conversation):
    path = socket_path(conversation, token_of(other_user))

    async def scenario():
        communicator = WebsocketCommunicator(application, path)
        connected, _ = await communicator.connect()
        # Ends the consumer as a server would after the close; left running, its channel-layer read is
        # cancelled at loop teardown instead, which can hang there.
        await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)() is False


def test_a_socket_without_credentials_is_refused(conversation):
    async def scenario():
        communicator = WebsocketCommunicator(application, socket_path(conversation))
        connected, _ = await communicator.connect()
        # Ends the consumer as a server would after the close; left running, its channel-layer read is
        # cancelled at loop teardown instead, which can hang there.
        await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)() is False


def test_a_socket_opened_while_postgresql_is_away_is_told_to_try_again_not_answered_500(user, conversation):
    path = socket_path(conversation, token_of(user))

    async def scenario():
        communicator = WebsocketCommunicator(application, path)
        connected, _ = await communicator.connect()
        closed = await communicator.receive_output(timeout=10)
        await communicator.disconnect()
        return connected, closed

    # The token is read from its cache, as on a live server; the conversation's owner only from PostgreSQL, which
    # the connection now reaches on a port nothing listens on (a restart's refused connections).
    async_to_sync(scenario)()
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = str(free_port())
    try:
        connected, closed = async_to_sync(scenario)()
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port

    assert connected is True
    assert (closed["type"], closed["code"]) == ("websocket.close", 1013)
