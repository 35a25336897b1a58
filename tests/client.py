"""The API as the tests drive it: one verb per thing a client does, defined once.

`client` is the test's in-process API client (DRF's `APIClient`, authenticated by the `api` fixture) or, where a
real web server must see the requests, an `httpx.Client` from `web_client` (that server's base URL and a user's
bearer token). Verbs that only make sense when they succeed (`post_message`, `start_task`, `history`, `submission`)
assert it and return the parsed body; `send_message` returns the response itself, for the tests of refusals.
"""

import httpx
from rest_framework.authtoken.models import Token

from devtools.stack import wait_until
from runtime.models import Event, EventType, Run, RunState

MAIN_CHAT_MESSAGES = "/api/v1/conversation/messages"
TASKS = "/api/v1/tasks"


def post(client, path: str, body: dict):
    if isinstance(client, httpx.Client):
        return client.post(path, json=body)
    return client.post(path, body, format="json")


def get(client, path: str, **query):
    if isinstance(client, httpx.Client):
        return client.get(path, params=query)
    return client.get(path, query)


def token_of(user) -> str:
    """The user's bearer token (created on first use)."""
    return Token.objects.get_or_create(user=user)[0].key


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def web_client(base_url: str, token: str) -> httpx.Client:
    """An HTTP client of a real web server, authenticated as the owner of `token`."""
    return httpx.Client(base_url=base_url, headers=bearer(token), timeout=30)


def send_message(client, text: str = "hello", *, client_message_id: str = "m-1", task_id=None, **fields):
    """Posts a message to the Main Chat (or to the task `task_id`); `fields` are further body fields as the wire
    spells them (`deviceId`, `clientContext`, `policy`, …). Returns the response, whatever it is."""
    path = f"{TASKS}/{task_id}/messages" if task_id else MAIN_CHAT_MESSAGES
    return post(client, path, {"clientMessageId": client_message_id, "text": text, **fields})


def post_message(client, text: str = "hello", *, client_message_id: str = "m-1", task_id=None, **fields) -> dict:
    """An accepted message's receipt (`messageId`, `submissionId`, …); see `send_message`."""
    response = send_message(client, text, client_message_id=client_message_id, task_id=task_id, **fields)
    assert response.status_code == 202, response.content
    return response.json()


def start_task(client, text: str = "plan", *, client_message_id: str = "t-1", **fields) -> dict:
    """A new task started by its first message: its receipt (`taskId`, `submissionId`, …)."""
    response = post(client, TASKS, {"clientMessageId": client_message_id, "text": text, **fields})
    assert response.status_code == 202, response.content
    return response.json()


def history(client, task_id=None, **query) -> dict:
    """The Main Chat's history (or the task's), as `GET …/conversation` answers it."""
    path = f"{TASKS}/{task_id}/conversation" if task_id else "/api/v1/conversation"
    response = get(client, path, **query)
    assert response.status_code == 200, response.content
    return response.json()


def submission(client, submission_id) -> dict:
    response = get(client, f"/api/v1/submissions/{submission_id}")
    assert response.status_code == 200, response.content
    return response.json()


def socket_path(conversation_id, token: str | None = None, *, after: str | None = "0") -> str:
    """A conversation socket's path and query: from `after` (none: the client names no position), authenticated by
    `token` if one is given."""
    query = [f"after={after}"] if after is not None else []
    query += [f"token={token}"] if token is not None else []
    return f"/ws/v1/conversations/{conversation_id}/?{'&'.join(query)}"


def socket_url(base_url: str, conversation_id, token: str | None = None, *, after: str | None = "0") -> str:
    """The conversation socket of the web server at `base_url` (http → ws)."""
    return base_url.replace("http", "ws", 1) + socket_path(conversation_id, token, after=after)


def run_of(submission_id) -> Run:
    run = _loaded(submission_id)
    assert run is not None, f"submission {submission_id} has no run"
    return run


def event_types(submission_id) -> list[str]:
    """The types of the submission's events, in order."""
    return list(Event.objects.filter(submission_id=submission_id).order_by("seq").values_list("type", flat=True))


def streamed_text(submission_id) -> str:
    """The submission's reply as its text deltas spelled it."""
    deltas = Event.objects.filter(submission_id=submission_id, type=EventType.TEXT_DELTA).order_by("seq")
    return "".join(event.payload["delta"] for event in deltas)


def _loaded(submission_id) -> Run | None:
    return Run.objects.select_related("submission__assistant_message").filter(submission_id=submission_id).first()


def finished_run(submission_id, *, timeout: float = 60) -> Run:
    """The submission's run once it ended (completed, failed or cancelled), with its reply."""
    return wait_until(
        lambda: (run := _loaded(submission_id)) and run.is_terminal and run,
        timeout=timeout,
        what=f"run of submission {submission_id} to finish",
    )


def settled_run(submission_id, *, timeout: float = 60) -> Run:
    """The submission's run once it ended or parked for reconciliation, with its reply."""
    return wait_until(
        lambda: (
            (run := _loaded(submission_id))
            and (run.is_terminal or run.state == RunState.PENDING_RECONCILIATION)
            and run
        ),
        timeout=timeout,
        what=f"run of submission {submission_id} to settle",
    )


def run_in_state(submission_id, state: str = RunState.COMPLETED, *, timeout: float = 60) -> Run:
    """The submission's run once it is in `state`, with its reply."""
    return wait_until(
        lambda: (run := _loaded(submission_id)) and run.state == state and run,
        timeout=timeout,
        what=f"submission {submission_id} to be {state}",
    )
