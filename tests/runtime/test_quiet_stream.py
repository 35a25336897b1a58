"""A turn whose open stream stays quiet (a model thinking before its first word): the truth is read after the first
quiet wait, then after waits that double up to a cap, and a cancel asked for meanwhile is still relayed
(runtime/execution/following.py, docs/architecture.md). Real workers, the double over HTTP."""

from collections import Counter

from devtools.stack import wait_until
from runtime.models import RunState
from tests.client import finished_run, post_message

QUIET_SECONDS = 12


def test_a_turn_quiet_for_12_seconds_on_an_open_stream_is_read_a_few_times_not_every_2_seconds(
    workers, api, rebyte_double
):
    rebyte_double.configure(delta_delay_ms=QUIET_SECONDS * 1000, delta_chunks=1)

    receipt = post_message(api, "think before you answer")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: think before you answer"
    calls = Counter(rebyte_double.state()["requests"])
    # Quiet waits of 2 s each: read after the 1st and the 3rd (the 7th would be at 14 s), then once at the turn's
    # end. Read after every wait, it was 6 reads in the quiet and one at the end.
    assert calls["list_items"] <= 4 and calls["list_turns"] <= 4, calls


def test_a_cancel_asked_for_while_the_stream_is_quiet_is_relayed_and_the_reply_never_comes(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=3 * QUIET_SECONDS * 1000, delta_chunks=1)
    receipt = post_message(api, "a long think")
    wait_until(
        lambda: any(
            turn["status"] == "in_progress"
            for session in rebyte_double.state()["sessions"]
            for turn in session["turns"]
        ),
        timeout=60,
        what="the turn in progress at the provider",
    )

    response = api.post(f"/api/v1/submissions/{receipt['submissionId']}/cancel", {}, format="json")
    assert response.status_code == 200

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.CANCELLED
    assert run.submission.assistant_message.text == ""
    state = rebyte_double.state()
    (session,) = state["sessions"]
    assert [turn["status"] for turn in session["turns"]] == ["cancelled"]
    cancels = [event for event in state["input_events"] if event["type"] == "agent.session.input.cancel"]
    assert [event["idempotency_key"] for event in cancels] == [f"impo-cancel-{run.id}"]
