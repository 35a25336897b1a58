"""Conversation sockets on real web processes when things fail: Redis stopped, a frame nobody can read, a web
process killed. Whatever ends a socket gives back its slot and its group membership, and nothing locks a user out.
"""

import time

import pytest
import redis
from django.db import connection
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from devtools.stack import Stack, start_web, wait_until
from runtime.outbound import conversation_group
from tests.client import history, post_message, socket_url, token_of, web_client
from tests.factories import UserFactory
from tests.faults.instances import PrivateRedis

pytestmark = pytest.mark.slow

SOCKET_CAP = 6
HELD_PER_USER = SOCKET_CAP - 1
USERS = 3
# The web process refreshes its sockets' slots and group memberships this often, checking every second: shortened from
# production's 15 s (and 5 s) so that an outage and an expiry need seconds, not minutes; the ratios stay production's.
PRESENCE_SECONDS = 3
REDIS_DOWN_SECONDS = 2 * PRESENCE_SECONDS  # refreshes fail during it
GROUP_EXPIRY_SECONDS = 4 * PRESENCE_SECONDS  # as production's 60 s to 15 s: a renewed membership outlives it


def main_conversation(web_url: str, token: str) -> str:
    with web_client(web_url, token) as client:
        return history(client)["conversationId"]


def open_socket(url: str):
    """A connected socket, or the close code it was refused with right after its accept."""
    socket = connect(url, open_timeout=20, close_timeout=2, legacy=True)
    try:
        # A conversation without events sends nothing on connecting; a refused socket sends its close.
        socket.recv(timeout=1)
    except TimeoutError:
        return socket
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else closed
    raise AssertionError("an event arrived on a conversation that has none")


def is_open(socket) -> bool:
    try:
        socket.recv(timeout=0.2)
    except TimeoutError:
        return True
    except ConnectionClosed:
        return False
    return True


def slots_held(redis_client: redis.Redis, user) -> int:
    # impo/limits.py keys a user's socket slots by database and user, scored by when each expires.
    key = f"impo:limits:{connection.settings_dict['NAME']}:websockets:{user.pk}"
    return redis_client.zcount(key, time.time(), "+inf")


def closed_with(socket) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        socket.recv(timeout=20)
    return closed.value.rcvd.code


def with_short_presence(stack: Stack) -> Stack:
    stack.env.update(
        {
            "IMPO_SOCKET_PRESENCE_SECONDS": str(PRESENCE_SECONDS),
            "IMPO_SOCKET_CATCH_UP_SECONDS": "1",
            "IMPO_CHANNEL_GROUP_EXPIRY_SECONDS": str(GROUP_EXPIRY_SECONDS),
        }
    )
    return stack


@pytest.fixture
def private_redis():
    instance = PrivateRedis()
    yield instance
    instance.stop()


@pytest.mark.django_db(transaction=True)
def test_after_redis_is_stopped_for_a_while_every_user_opens_a_new_socket_at_once(rebyte_double, private_redis):
    stack = with_short_presence(
        Stack(database_name=connection.settings_dict["NAME"], double=rebyte_double, redis_url=private_redis.url)
    )
    stack.env["IMPO_LIMIT_WEBSOCKETS"] = str(SOCKET_CAP)
    try:
        web, web_url = start_web(stack)
        users = UserFactory.create_batch(USERS)
        tokens = [token_of(user) for user in users]
        urls = [socket_url(web_url, main_conversation(web_url, token), token) for token in tokens]
        held = [[open_socket(url) for _ in range(HELD_PER_USER)] for url in urls]
        assert not [socket for sockets in held for socket in sockets if isinstance(socket, int)]

        private_redis.stop()
        stopped = time.monotonic()
        wait_until(lambda: time.monotonic() - stopped >= REDIS_DOWN_SECONDS, timeout=60, what="the outage to last")
        private_redis.start()
        redis_client = redis.Redis.from_url(private_redis.url)
        # Redis came back empty: wait for the web process to put back the slots it believes are held.
        wait_until(
            lambda: all(slots_held(redis_client, user) >= HELD_PER_USER for user in users),
            timeout=60,
            what="the slots of the held sockets to be refreshed",
        )

        # As a client would: reopen what was closed, then every user opens one more socket, all at once.
        reopened = [
            [s if is_open(s) else open_socket(url) for s in sockets] for url, sockets in zip(urls, held, strict=True)
        ]
        dropped = sum(1 for sockets in held for socket in sockets if not is_open(socket))
        new = [open_socket(url) for url in urls]
        refusals = [item for item in [*new, *(s for sockets in reopened for s in sockets)] if isinstance(item, int)]
        print(
            f"\nafter a {REDIS_DOWN_SECONDS} s Redis outage: {dropped} of {USERS * HELD_PER_USER} held sockets "
            f"were dropped, {len(refusals)} refusals among {len(new)} new sockets and the reopened ones"
        )
        assert refusals == []
        assert dropped == 0  # the sockets lived on the event log through the outage

        expected = [HELD_PER_USER + 1] * USERS
        wait_until(
            lambda: [slots_held(redis_client, user) for user in users] == expected,
            timeout=45,
            what=f"each user's slot count to equal their open sockets ({expected})",
        )
        for socket in [*new, *(s for sockets in reopened for s in sockets)]:
            socket.close()
        # Generous: on a loaded machine the web process may take a while to see eighteen closes; what is checked is
        # that every slot comes back, not how fast.
        wait_until(
            lambda: [slots_held(redis_client, user) for user in users] == [0] * USERS,
            timeout=90,
            what="every slot to be given back when the sockets close",
        )
        assert "Traceback" not in web.log_text()
    finally:
        stack.stop()


@pytest.mark.django_db(transaction=True)
def test_a_frame_nobody_can_read_closes_only_its_own_socket_without_a_traceback(stack, user, settings):
    web, web_url = start_web(stack)
    token = token_of(user)
    url = socket_url(web_url, main_conversation(web_url, token), token)
    bystander, deep, oversized = open_socket(url), open_socket(url), open_socket(url)

    deep.send("[" * 65536)
    oversized.send("[]" + " " * 65536)

    assert closed_with(deep) == 1007
    assert closed_with(oversized) == 1009
    with web_client(web_url, token) as client:
        post_message(client, client_message_id="after-the-bad-frames")
    event = bystander.recv(timeout=20)
    assert '"submission.accepted"' in event
    # Their slots came back at once: only the bystander's is held.
    assert slots_held(redis.Redis.from_url(settings.REDIS_URL), user) == 1
    bystander.close()
    assert "Traceback" not in web.log_text()


@pytest.mark.django_db(transaction=True)
def test_the_channels_of_a_killed_web_process_leave_their_groups(stack, user, settings):
    with_short_presence(stack)
    token = token_of(user)
    killed, killed_url = start_web(stack, name="web-killed")
    web, web_url = start_web(stack)  # before the orphan joins: its membership must not expire while this starts
    conversation_id = main_conversation(killed_url, token)
    orphan = open_socket(socket_url(killed_url, conversation_id, token))
    survivor = open_socket(socket_url(web_url, conversation_id, token))
    killed.kill()
    orphan.close_socket()

    redis_client = redis.Redis.from_url(settings.REDIS_URL)
    group_key = f"asgi:group:{conversation_group(conversation_id)}"  # channels-redis's key of the group

    def members() -> int:
        return redis_client.zcount(group_key, time.time() - GROUP_EXPIRY_SECONDS, "+inf")

    assert members() == 2
    started = time.monotonic()
    wait_until(lambda: members() == 1, timeout=GROUP_EXPIRY_SECONDS + 60, interval=1, what="the dead channel to leave")
    print(f"\nthe killed process's channel left its group after {time.monotonic() - started:.0f} s")
    # The live socket's membership outlived the expiry (renewed), so the push still reaches it.
    wait_until(lambda: time.monotonic() - started > GROUP_EXPIRY_SECONDS + 5, timeout=90, what="the expiry to pass")
    assert members() == 1
    with web_client(web_url, token) as client:
        post_message(client, client_message_id="after-the-expiry")
    assert '"submission.accepted"' in survivor.recv(timeout=20)
    survivor.close()
