"""A provider that answers 404 for an agent or a session Impo holds has lost it: the run goes on in a new one
(docs/design.md §5). Only a definite "not found" heals; a 503 or a lost answer stays on the reconciliation path."""

import pytest
from django.test import Client

from devtools.stack import RebyteDouble, Stack, wait_until
from rebyte.models import CreationIntent, IntentState, RemoteSession, SavedAgent, SessionState
from runtime.models import Event, EventType, Message, Run, RunState
from tests.client import post_message, run_in_state, start_task
from tests.factories import UserFactory

CARRY = "Earlier in this conversation (context, not a new request):\n"


@pytest.fixture
def own_stack(transactional_db, shared_stack, settings):
    """A stack on a double of its own, which a test may restart (the session-wide one serves other tests)."""
    from django.db import connection

    from impo.celery import app

    shared_stack.stop()
    double = RebyteDouble()
    settings.REBYTE_BASE_URL = double.api_url
    app.control.purge()
    running = Stack(database_name=connection.settings_dict["NAME"], double=double, redis_url=settings.REDIS_URL)
    yield running
    running.stop()
    double.stop()


def first_input_of(double_session: dict) -> list[str]:
    first = next(item for item in double_session["items"] if item.get("role") == "user")
    return [part["text"] for part in first["content"]]


def replaced_lines(run: Run) -> list[dict]:
    return list(
        Event.objects.filter(submission_id=run.submission_id, type=EventType.RUN_SESSION_REPLACED).values_list(
            "payload", flat=True
        )
    )


def test_a_restarted_provider_heals_the_main_chat_and_a_task_with_one_new_agent(own_stack, api):
    double = own_stack.double
    own_stack.start_worker("one")
    own_stack.start_worker("two")
    own_stack.start_sweeper()
    run_in_state(post_message(api, "chat before", client_message_id="c-1")["submissionId"])
    task = start_task(api, "task before", client_message_id="t-1")
    run_in_state(task["submissionId"])

    double.restart()

    # Both at once, on two workers: both find the agent gone, and one new agent serves them.
    chat = post_message(api, "chat after", client_message_id="c-2")
    task_message = post_message(api, "task after", client_message_id="t-2", task_id=task["taskId"])
    chat_run, task_run = run_in_state(chat["submissionId"]), run_in_state(task_message["submissionId"])

    assert chat_run.submission.assistant_message.text == "Echo: chat after"
    assert task_run.submission.assistant_message.text == "Echo: task after"
    state = double.state()
    assert (state["counts"]["agents"], state["counts"]["sessions"]) == (1, 2)
    inputs = sorted(first_input_of(session) for session in state["sessions"])
    assert inputs == sorted(
        [
            [f"{CARRY}User: chat before\nAssistant: Echo: chat before", "chat after"],
            [f"{CARRY}User: task before\nAssistant: Echo: task before", "task after"],
        ]
    )
    # The bindings Impo held are marked gone, not deleted: the history before them stays attributable.
    assert SavedAgent.objects.filter(gone_at__isnull=False).count() == 1
    assert SavedAgent.objects.filter(gone_at__isnull=True).count() == 1
    assert RemoteSession.objects.filter(state=SessionState.GONE).count() == 2
    assert RemoteSession.objects.filter(state=SessionState.CURRENT).count() == 2
    for run in (chat_run, task_run):
        (line,) = replaced_lines(run)
        assert "a new session was started" in line["message"]


def test_a_provider_restarted_while_a_reply_streams_leaves_only_the_new_answer(own_stack, api):
    own_stack.start_worker()
    own_stack.double.configure(delta_delay_ms=300, delta_chunks=40)  # a reply of 12 s, restarted in its first words
    text = "tell me something long enough to take a while"
    sent = post_message(api, text, client_message_id="c-1")
    wait_until(lambda: Message.objects.get(id=sent["replyMessageId"]).text, timeout=60, what="the reply's first words")

    own_stack.double.restart()

    run = run_in_state(sent["submissionId"], timeout=120)
    # Not the lost half followed by the whole: the new session's answer alone.
    assert run.submission.assistant_message.text == f"Echo: {text}"
    (line,) = replaced_lines(run)
    assert line["replyRestarted"] is True and line["messageId"] == sent["replyMessageId"]
    # A client replaying the log clears the reply at the line: the deltas after it are the reply's text.
    events = list(Event.objects.filter(submission_id=run.submission_id).order_by("seq").values_list("type", "payload"))
    after = events[[kind for kind, _ in events].index(EventType.RUN_SESSION_REPLACED) + 1 :]
    assert "".join(payload["delta"] for kind, payload in after if kind == EventType.TEXT_DELTA) == f"Echo: {text}"


def test_staff_see_the_lost_session_and_the_agent_that_replaced_it(own_stack, api):
    own_stack.start_worker()
    run_in_state(post_message(api, "before", client_message_id="c-1")["submissionId"])
    own_stack.double.restart()
    run_in_state(post_message(api, "after", client_message_id="c-2")["submissionId"])
    desk = Client()
    desk.force_login(UserFactory(is_staff=True, is_superuser=True))

    sessions = desk.get("/admin/rebyte/remotesession/?state__exact=gone").content.decode()
    agents = desk.get("/admin/rebyte/savedagent/").content.decode()

    (gone,) = RemoteSession.objects.filter(state=SessionState.GONE)
    assert gone.remote_id in sessions
    assert gone.rotation_reason == "not_found"
    old, new = SavedAgent.objects.order_by("created_at")
    assert old.remote_id in agents and new.remote_id in agents
    assert old.gone_at is not None and new.gone_at is None


def test_a_503_to_a_session_create_parks_the_run_and_heals_nothing(own_stack, api):
    double = own_stack.double
    own_stack.start_worker()
    run_in_state(post_message(api, "before", client_message_id="c-1")["submissionId"])
    double.fault("create_session", "http_error", status=503, times=2)
    double.fault("list_sessions", "http_error", status=503, seconds=60)

    run = run_in_state(
        start_task(api, "a task", client_message_id="t-1")["submissionId"], RunState.PENDING_RECONCILIATION
    )

    assert CreationIntent.objects.filter(state=IntentState.PENDING_RECONCILIATION, kind="session").count() == 1
    assert not SavedAgent.objects.filter(gone_at__isnull=False).exists()
    assert not RemoteSession.objects.filter(state=SessionState.GONE).exists()
    assert replaced_lines(run) == []
    assert double.state()["counts"]["agents"] == 1


def test_a_lost_answer_to_a_session_create_parks_the_run_and_heals_nothing(own_stack, api):
    double = own_stack.double
    own_stack.start_worker()
    run_in_state(post_message(api, "before", client_message_id="c-1")["submissionId"])
    double.fault("create_session", "drop_response")
    double.fault("list_sessions", "http_error", status=503, seconds=60)

    run = run_in_state(
        start_task(api, "a task", client_message_id="t-1")["submissionId"], RunState.PENDING_RECONCILIATION
    )

    assert not SavedAgent.objects.filter(gone_at__isnull=False).exists()
    assert replaced_lines(run) == []
    assert double.state()["counts"]["agents"] == 1


def test_a_session_answering_503_for_a_while_keeps_the_conversation_in_it(own_stack, api):
    double = own_stack.double
    own_stack.start_worker()
    run_in_state(post_message(api, "before", client_message_id="c-1")["submissionId"])
    double.fault("list_turns", "http_error", status=503, seconds=3)

    run = run_in_state(post_message(api, "during", client_message_id="c-2")["submissionId"])

    assert run.submission.assistant_message.text == "Echo: during"
    assert double.state()["counts"]["sessions"] == 1
    assert not RemoteSession.objects.filter(state=SessionState.GONE).exists()
    assert replaced_lines(run) == []
