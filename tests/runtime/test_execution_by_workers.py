"""Runs executed by real Celery worker processes against the Rebyte double over HTTP."""

import pytest

from runtime.models import Event, EventType, Message, MessageRole, Run, RunState
from tests.processes import wait_until


def post_message(api, text, client_message_id="m-1"):
    response = api.post(
        "/api/v1/conversation/messages", {"clientMessageId": client_message_id, "text": text}, format="json"
    )
    assert response.status_code == 202
    return response.json()


def finished_run(submission_id, timeout=60) -> Run:
    def terminal():
        run = Run.objects.select_related("submission__assistant_message").get(submission_id=submission_id)
        return run if run.is_terminal else None

    return wait_until(terminal, timeout=timeout, what=f"run of submission {submission_id} to finish")


def event_types(submission_id) -> list[str]:
    return list(Event.objects.filter(submission_id=submission_id).order_by("seq").values_list("type", flat=True))


def streamed_text(submission_id) -> str:
    deltas = Event.objects.filter(submission_id=submission_id, type=EventType.TEXT_DELTA).order_by("seq")
    return "".join(event.payload["delta"] for event in deltas)


def test_a_message_produces_the_echoed_reply(stack, api):
    stack.start_worker()

    receipt = post_message(api, "hello there")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: hello there"
    assert run.submission.assistant_message.status == "completed"
    types = event_types(receipt["submissionId"])
    assert types[:2] == ["submission.accepted", "run.started"]
    assert types[-2:] == ["message.completed", "run.completed"]
    assert types.count("text.delta") >= 2
    assert streamed_text(receipt["submissionId"]) == "Echo: hello there"
    seqs = list(Event.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_killed_worker_is_replaced_after_its_lease_and_no_text_is_duplicated(stack, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=400, delta_chunks=8)
    first = stack.start_worker("doomed")
    stack.start_sweeper()

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
    assert Message.objects.filter(role=MessageRole.ASSISTANT).count() == 1
    assert event_types(receipt["submissionId"]).count("message.completed") == 1
    assert rebyte_double.state()["counts"]["turns"] == 1


def test_a_run_whose_wake_up_was_lost_is_recovered_by_the_sweeper(stack, api):
    from impo.celery import app

    receipt = post_message(api, "nobody heard this")
    app.control.purge()  # the broker lost the wake-up
    stack.start_worker()
    stack.start_sweeper()

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: nobody heard this"


def test_a_cut_turn_stream_is_resumed_without_losing_or_repeating_text(stack, api, rebyte_double):
    rebyte_double.fault("turn_events", "cut_stream", after_events=2, times=2)
    stack.start_worker()

    receipt = post_message(api, "resume me please")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.attempts == 1
    assert streamed_text(receipt["submissionId"]) == "Echo: resume me please"


def test_a_lost_create_turn_response_is_looked_up_instead_of_sending_the_turn_twice(stack, api, rebyte_double):
    rebyte_double.fault("create_turn", "drop_response")
    stack.start_worker()

    receipt = post_message(api, "only once")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: only once"
    assert rebyte_double.state()["counts"]["turns"] == 1


def test_a_provider_refusing_a_turn_fails_the_run_visibly(stack, api, rebyte_double):
    stack.start_worker()

    receipt = post_message(api, "/fail the agent broke")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.FAILED
    assert run.error_code == "agent_error"
    assert run.submission.assistant_message.status == "failed"
    body = api.get(f"/api/v1/submissions/{receipt['submissionId']}").json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "agent_error"
    assert event_types(receipt["submissionId"])[-1] == "run.failed"


@pytest.mark.parametrize("operation", ["create_agent", "create_session"])
def test_a_lost_create_response_leaves_exactly_one_remote_resource(stack, api, rebyte_double, operation):
    rebyte_double.fault(operation, "drop_response")
    stack.start_worker()

    run = finished_run(post_message(api, "hello")["submissionId"])

    assert run.state == RunState.COMPLETED
    counts = rebyte_double.state()["counts"]
    assert (counts["agents"], counts["sessions"]) == (1, 1)
