"""A web process catches all of its open sockets up with one query per interval, not one per socket."""

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection, transaction
from rest_framework.authtoken.models import Token

from impo.asgi import application
from runtime.events import append_events
from runtime.models import EventType
from tests.client import send_message
from tests.conftest import bearer_client
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

SOCKETS_PER_CONVERSATION = 3
CONVERSATIONS = 3


@pytest.fixture(autouse=True)
def short_interval(settings):
    settings.IMPO_SOCKET_CATCH_UP_SECONDS = 0.2


def conversation_with_token() -> tuple[str, str]:
    user = UserFactory()
    api = bearer_client(user)
    send_message(api, "hi", client_message_id="m-1")
    return api.get("/api/v1/conversation").json()["conversationId"], Token.objects.get(user=user).key


def append_with_the_push_lost(conversation_id, count: int) -> None:
    """Commits events whose after-commit push never leaves, as when the writer dies right after its commit."""
    with transaction.atomic():
        append_events(conversation_id, None, [(EventType.TEXT_DELTA, {"delta": f"{index} "}) for index in range(count)])
        connection.run_on_commit.clear()


async def open_sockets(conversations: list[tuple[str, str]]) -> list[tuple[str, WebsocketCommunicator]]:
    sockets = []
    for conversation_id, token in conversations:
        for _ in range(SOCKETS_PER_CONVERSATION):
            communicator = WebsocketCommunicator(
                application, f"/ws/v1/conversations/{conversation_id}/?after=1&token={token}"
            )
            assert (await communicator.connect())[0]
            sockets.append((conversation_id, communicator))
    return sockets


def test_events_whose_push_was_lost_reach_every_open_socket():
    conversations = [conversation_with_token() for _ in range(CONVERSATIONS)]

    async def scenario():
        sockets = await open_sockets(conversations)
        for conversation_id, _ in conversations:
            await database_sync_to_async(append_with_the_push_lost)(conversation_id, 4)
        received = {}
        for index, (_, communicator) in enumerate(sockets):
            received[index] = [(await communicator.receive_json_from(timeout=20))["seq"] for _ in range(4)]
        for _, communicator in sockets:
            await communicator.disconnect()
        return received

    received = async_to_sync(scenario)()

    assert received == {index: [2, 3, 4, 5] for index in range(CONVERSATIONS * SOCKETS_PER_CONVERSATION)}


def test_idle_sockets_cost_one_catch_up_query_per_interval_however_many_are_open():
    conversations = [conversation_with_token() for _ in range(CONVERSATIONS)]
    statements: list[str] = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    def catch_up_reads() -> int:
        return sum("last_event_seq" in sql for sql in statements)

    def event_log_reads() -> int:
        return sum("runtime_event" in sql for sql in statements)

    async def scenario():
        sockets = await open_sockets(conversations)

        async def idle_until(done) -> None:
            while not done():
                for _, communicator in sockets:
                    assert await communicator.receive_nothing(timeout=0.1)

        # Each socket reads its log once, after its handshake and before it joins the rounds; on a loaded machine
        # some of those reads come after a round has run. Once all have, and a round has followed, only rounds read.
        await idle_until(lambda: event_log_reads() >= len(sockets))
        statements.clear()
        await idle_until(lambda: catch_up_reads() >= 1)
        statements.clear()
        await idle_until(lambda: catch_up_reads() >= 4)
        observed = list(statements)
        for _, communicator in sockets:
            await communicator.disconnect()
        return observed

    # The consumers' database calls run on this thread (async_to_sync keeps thread-sensitive calls here), so
    # this connection's wrapper sees every statement the catch-up issues.
    with connection.execute_wrapper(record):
        observed = async_to_sync(scenario)()

    rounds = sum("last_event_seq" in sql for sql in observed)
    # A round is one query for the newest seqs of all nine sockets' conversations, plus (every 15 s) one for
    # their active submissions; the round in progress when the window closed may have issued its first only.
    assert rounds >= 4
    assert len(observed) <= 2 * rounds
    assert all("runtime_event" not in sql for sql in observed), "an idle socket read its event log"
