"""Runs executed by real Celery worker processes against the Rebyte double over HTTP."""

import pytest

from devtools.stack import wait_until
from runtime.models import Event, EventType, Message, MessageRole, RunState
from tests.client import event_types, finished_run, post_message, streamed_text

# The outage test's backoff cap, shorter than the stack's: its outage is five caps long, and what it proves (runs keep
# trying at the cap without spending attempts) does not depend on the cap's length.
SHORT_BACKOFF_CAP_SECONDS = 1


def input_events_of(double_state, kind="agent.session.input.message") -> list[dict]:
    return [event for event in double_state["input_events"] if event["type"] == kind]


def test_a_message_produces_the_echoed_reply(workers, api):

    receipt = post_message(api, "hello there")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: hello there"
    assert run.submission.assistant_message.status == "completed"
    types = event_types(receipt["submissionId"])
    assert types[:2] == ["submission.accepted", "run.started"]
    assert types[-2:] == ["message.completed", "run.completed"]
    assert streamed_text(receipt["submissionId"]) == "Echo: hello there"
    seqs = list(Event.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def worker_backends(application_name: str) -> set[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = %s", [application_name]
        )
        return set(cursor.fetchall())


def test_a_worker_keeps_its_database_connection_from_one_wake_up_to_the_next(stack, api):
    # Celery's Django integration closes connections around every task unless told otherwise: a PostgreSQL
    # backend forked per wake-up, and the prepared claim lost with it.
    stack.start_worker(env={"PGAPPNAME": "impo-test-worker"})
    finished_run(post_message(api, "first", client_message_id="m-1")["submissionId"])
    after_first = worker_backends("impo-test-worker")

    finished_run(post_message(api, "second", client_message_id="m-2")["submissionId"])

    assert after_first & worker_backends("impo-test-worker")


def test_a_finished_run_leaves_no_live_stream_open_upstream(workers, api, rebyte_double):
    for index in range(2):
        assert (
            finished_run(post_message(api, f"message {index}", client_message_id=f"m-{index}")["submissionId"]).state
            == "completed"
        )
        # A quiet session's stream would otherwise hold a worker thread and a connection until its next event.
        wait_until(
            lambda: rebyte_double.state()["live_streams"] == {}, timeout=30, what="the run's live stream to close"
        )


def test_a_later_message_goes_to_the_same_session_as_one_keyed_input_event_and_streams_live(
    workers, api, rebyte_double
):
    finished_run(post_message(api, "first", client_message_id="m-1")["submissionId"])
    rebyte_double.configure(delta_delay_ms=150, delta_chunks=6)

    receipt = post_message(api, "second message", client_message_id="m-2")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert streamed_text(receipt["submissionId"]) == "Echo: second message"
    assert event_types(receipt["submissionId"]).count("text.delta") >= 3
    state = rebyte_double.state()
    assert state["counts"]["sessions"] == 1
    assert [event["idempotency_key"] for event in input_events_of(state)] == [f"impo-run-{run.id}"]
    assert state["steering"] == []


def test_a_killed_worker_is_replaced_after_its_lease_and_no_text_is_duplicated(stack, api, rebyte_double):
    first = stack.start_worker("doomed")
    stack.start_sweeper()
    finished_run(post_message(api, "warm up", client_message_id="m-0")["submissionId"])
    rebyte_double.configure(delta_delay_ms=400, delta_chunks=8)

    receipt = post_message(api, "the quick brown fox jumps over the lazy dog")
    wait_until(
        lambda: Event.objects.filter(submission_id=receipt["submissionId"], type=EventType.TEXT_DELTA).count() >= 2,
        timeout=30,
        what="the first deltas",
    )
    first.kill()
    stack.start_worker("successor")

    run = finished_run(receipt["submissionId"])
    expected = "Echo: the quick brown fox jumps over the lazy dog"
    assert run.state == RunState.COMPLETED
    assert run.attempts == 2
    assert run.lease_generation == 2
    assert run.submission.assistant_message.text == expected
    assert streamed_text(receipt["submissionId"]) == expected
    assert Message.objects.filter(role=MessageRole.ASSISTANT, text=expected).count() == 1
    assert event_types(receipt["submissionId"]).count("message.completed") == 1
    state = rebyte_double.state()
    assert state["counts"]["turns"] == 2
    assert len(input_events_of(state)) == 1
    assert state["steering"] == []


def test_a_run_whose_wake_up_was_lost_is_recovered_by_the_sweeper(stack, api):
    from impo.celery import app

    receipt = post_message(api, "nobody heard this")
    app.control.purge()  # the broker lost the wake-up
    stack.start_worker()
    stack.start_sweeper()

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: nobody heard this"


def test_a_cut_live_stream_loses_and_repeats_no_text(workers, api, rebyte_double):
    finished_run(post_message(api, "warm up", client_message_id="m-0")["submissionId"])
    rebyte_double.configure(delta_delay_ms=100, delta_chunks=8)
    rebyte_double.fault("session_events", "cut_stream", after_events=3, times=3)

    receipt = post_message(api, "resume me please")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.attempts == 1
    assert streamed_text(receipt["submissionId"]) == "Echo: resume me please"


def test_a_broken_stream_scenario_still_yields_the_whole_reply(workers, api, rebyte_double):
    finished_run(post_message(api, "warm up", client_message_id="m-0")["submissionId"])
    rebyte_double.configure(delta_delay_ms=100, delta_chunks=6)

    run = finished_run(post_message(api, "/broken stream cut mid-turn")["submissionId"])

    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: stream cut mid-turn"


def test_a_lost_202_of_the_input_event_is_resent_with_the_same_key_and_starts_one_turn(workers, api, rebyte_double):
    finished_run(post_message(api, "warm up", client_message_id="m-0")["submissionId"])
    rebyte_double.fault("input_message", "drop_response")

    receipt = post_message(api, "only once")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: only once"
    state = rebyte_double.state()
    assert state["counts"]["turns"] == 2
    keys = [event["idempotency_key"] for event in input_events_of(state)]
    assert keys == [f"impo-run-{run.id}"]  # the resend was recognised, not applied again
    assert state["requests"]["input_message"] >= 2


def test_a_failing_turn_fails_the_run_visibly(workers, api):

    receipt = post_message(api, "/fail the agent broke")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.FAILED
    assert (run.error_code, run.error_message) == ("internal_error", "the agent broke")
    assert run.submission.assistant_message.status == "failed"
    body = api.get(f"/api/v1/submissions/{receipt['submissionId']}").json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "internal_error"
    assert event_types(receipt["submissionId"])[-1] == "run.failed"


@pytest.mark.parametrize("operation", ["create_agent", "create_session"])
def test_a_lost_create_response_leaves_exactly_one_remote_resource(workers, api, rebyte_double, operation):
    # New sessions show in listings late, as the SDK warns: the lookup must not read "absent" too early.
    rebyte_double.configure(listing_lag_ms=700)
    rebyte_double.fault(operation, "drop_response")

    run = finished_run(post_message(api, "hello")["submissionId"])

    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: hello"
    counts = rebyte_double.state()["counts"]
    assert (counts["agents"], counts["sessions"], counts["turns"]) == (1, 1, 1)


def test_five_messages_posted_at_once_reach_the_session_in_order_without_steering(stack, api, rebyte_double):
    stack.start_worker("one")
    stack.start_worker("two")
    stack.start_sweeper()
    rebyte_double.configure(delta_delay_ms=60, delta_chunks=4)

    receipts = [post_message(api, f"message {n}", client_message_id=f"m-{n}") for n in range(5)]

    runs = [finished_run(receipt["submissionId"], timeout=120) for receipt in receipts]
    assert [run.state for run in runs] == [RunState.COMPLETED] * 5
    assert [run.submission.assistant_message.text for run in runs] == [f"Echo: message {n}" for n in range(5)]
    state = rebyte_double.state()
    assert state["steering"] == []
    (session,) = state["sessions"]
    user_texts = [item["content"][-1]["text"] for item in session["items"] if item.get("role") == "user"]
    assert user_texts == [f"message {n}" for n in range(5)]


@pytest.mark.slow
def test_a_provider_answering_5xx_for_five_backoff_caps_delays_runs_but_fails_none(stack, api, rebyte_double):
    stack.env["IMPO_PROVIDER_BACKOFF_CAP_SECONDS"] = str(SHORT_BACKOFF_CAP_SECONDS)
    stack.start_worker("one")
    stack.start_worker("two")
    stack.start_sweeper()
    finished_run(post_message(api, "warm up", client_message_id="m-0")["submissionId"])
    # Five times the longest wait between two attempts: each run keeps trying at the cap, and no attempt is spent.
    rebyte_double.fault("*", "http_error", status=503, seconds=5 * SHORT_BACKOFF_CAP_SECONDS)

    receipts = [post_message(api, f"during the outage {n}", client_message_id=f"m-{n + 1}") for n in range(3)]

    runs = [finished_run(receipt["submissionId"], timeout=150) for receipt in receipts]
    assert [run.state for run in runs] == [RunState.COMPLETED] * 3
    assert [run.submission.assistant_message.text for run in runs] == [f"Echo: during the outage {n}" for n in range(3)]
    # Provider outages back off without spending attempts, which bound crashes of our own code only.
    assert [run.attempts for run in runs] == [1, 1, 1]
    assert rebyte_double.state()["steering"] == []
