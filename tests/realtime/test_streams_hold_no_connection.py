"""Open streams wait without a database connection, so one user's many streams cannot starve everyone else.

Were each waiting stream to keep the connection it read with, thirty of them would drain the web process's
pool and every other request would wait out the pool's timeout and fail.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
from django.db import connection

from devtools.stack import MAKE_RUN_WEB_PROCESSES, start_web, wait_until
from tests.client import send_message, token_of

POOL_SIZE = 5  # each web process's pool, made small so that streams holding connections would drain it
STREAMS = 30


def web_process_connections() -> int:
    """Connections to the test database other than this test's own (no worker runs here: all are the web's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_thirty_open_streams_of_one_user_leave_other_users_requests_answering(stack, api, user, other_user):
    stack.env["DATABASE_POOL_MAX_SIZE"] = str(POOL_SIZE)
    stack.env["IMPO_LIMIT_STREAMS"] = str(STREAMS)  # this user may hold them all: the pool is what is tested
    # No worker: the run stays queued and every stream stays open, waiting.
    _, web = start_web(stack, processes=MAKE_RUN_WEB_PROCESSES)
    submission_id = send_message(api, "wait for me", client_message_id="m-1").json()["submissionId"]
    # A bearer token: a session cookie made here would not verify there (the server has a secret key of its own).
    streamer = {"Authorization": f"Bearer {token_of(user)}"}
    other = {"Authorization": f"Bearer {token_of(other_user)}"}
    opened, release = threading.Semaphore(0), threading.Event()

    def hold_stream():
        url = f"{web}/api/v1/submissions/{submission_id}/stream"
        with httpx.stream("GET", url, headers=streamer, timeout=60) as response:
            assert response.status_code == 200
            next(response.iter_lines())
            opened.release()
            release.wait(timeout=120)

    holders = [threading.Thread(target=hold_stream, daemon=True) for _ in range(STREAMS)]
    for holder in holders:
        holder.start()
    for _ in range(STREAMS):
        assert opened.acquire(timeout=60), "a stream did not open"
    held_while_waiting = web_process_connections()

    def other_users_page(_):
        return httpx.get(f"{web}/api/v1/conversation", headers=other, timeout=30).status_code

    with ThreadPoolExecutor(max_workers=POOL_SIZE) as pool:
        during = list(pool.map(other_users_page, range(40)))

    release.set()
    for holder in holders:
        holder.join(timeout=30)
    wait_until(
        lambda: api.get(f"/api/v1/submissions/{submission_id}").json()["subscriberCount"] == 0,
        timeout=60,
        what="the streams to be gone",
    )
    with ThreadPoolExecutor(max_workers=POOL_SIZE) as pool:
        after = list(pool.map(other_users_page, range(40)))

    assert held_while_waiting <= POOL_SIZE * MAKE_RUN_WEB_PROCESSES
    assert during == [200] * 40
    assert after == [200] * 40  # the pool kept its connections: as many requests at once as it holds
