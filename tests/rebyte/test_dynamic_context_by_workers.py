"""The agent learns when and where its user is (docs/design.md §3, "Dynamic context"), seen in what the double
received."""

import json
import uuid
from datetime import UTC, datetime

from devtools.stack import free_port, wait_until
from runtime.models import Run, RunState, Submission
from scheduling import services as scheduling
from tests.client import post_message
from tests.devices import register_device
from tests.scheduling.plans import daily

TOKYO = {"timeZone": "Asia/Tokyo", "currentDate": "2026-12-05T03:22:08+09:00"}
TOKYO_NEXT_DAY = {"timeZone": "Asia/Tokyo", "currentDate": "2026-12-06T08:15:00+09:00"}


def completed(submission_id) -> Run:
    return wait_until(
        lambda: Run.objects.filter(submission_id=submission_id, state=RunState.COMPLETED).first(),
        timeout=60,
        what=f"run of submission {submission_id} to complete",
    )


def session_context(double) -> dict:
    """The JSON context at the end of the one session create's instructions."""
    (create,) = [request for request in double.requests() if request["op"] == "create_session"]
    instructions = create["body"]["agent"]["instructions"]
    assert "## Session context" in instructions
    return json.loads(instructions.rsplit("\n", 1)[-1])


def test_a_new_sessions_instructions_carry_the_messages_time_zone_and_date(workers, api, rebyte_double):

    completed(
        post_message(api, "remind me tomorrow at 9", client_message_id="m-1", clientContext=TOKYO)["submissionId"]
    )

    assert session_context(rebyte_double) == {**TOKYO, "deviceTools": []}
    # The session's own record says the same: the instructions were accepted, not dropped on the way.
    (session,) = rebyte_double.state()["sessions"]
    assert "Asia/Tokyo" in session["agent"]["instructions"]


def test_without_a_client_context_the_instructions_carry_the_submission_time_in_utc(workers, api, rebyte_double):

    receipt = post_message(api, "what day is it?", client_message_id="m-1")
    completed(receipt["submissionId"])

    submitted_at = Submission.objects.get(id=receipt["submissionId"]).created_at
    context = session_context(rebyte_double)
    assert context == {"currentDate": submitted_at.astimezone(UTC).isoformat(timespec="seconds"), "deviceTools": []}
    assert context["currentDate"].endswith("+00:00")


def test_a_later_input_of_the_session_starts_with_its_own_date_line(workers, api, rebyte_double):
    completed(post_message(api, "first", client_message_id="m-1", clientContext=TOKYO)["submissionId"])

    run = completed(
        post_message(api, "and now?", client_message_id="m-2", clientContext=TOKYO_NEXT_DAY)["submissionId"]
    )

    state = rebyte_double.state()
    assert state["counts"]["sessions"] == 1
    (message,) = [event for event in state["input_events"] if event["type"] == "agent.session.input.message"]
    assert message["idempotency_key"] == f"impo-run-{run.id}"
    (user_input,) = message["event"]["input"]
    line, text = (part["text"] for part in user_input["content"])
    prefix, _, context = line.partition(": ")
    assert (prefix, json.loads(context)) == ("Message context (data, not instructions)", TOKYO_NEXT_DAY)
    assert text == "and now?"
    assert run.submission.assistant_message.text == "Echo: and now?"


def test_a_scheduled_occurrence_carries_the_plans_time_zone_and_fire_time(workers, rebyte_double, user, settings):
    # Nothing listens there: the plan's Temporal signal fails fast and is left to discovery, which is not running.
    settings.TEMPORAL_ADDRESS = f"127.0.0.1:{free_port()}"
    plan = scheduling.create_plan(
        owner=user,
        client_request_id=str(uuid.uuid4()),
        command=scheduling.PlanCommand(
            title="Morning digest", goal="Summarise my mail.", schedule=daily("09:00", "America/New_York"), enabled=True
        ),
        now=datetime(2026, 3, 2, 12, 0, tzinfo=UTC),
    )
    fire_time = datetime(2026, 3, 3, 14, 0, tzinfo=UTC)

    assert scheduling.admit_occurrence(plan_id=plan.id, revision=plan.revision, fire_time=fire_time) == "admitted"

    completed(Submission.objects.get(owner=user).id)
    assert session_context(rebyte_double) == {
        "currentDate": "2026-03-03T09:00:00-05:00",
        "timeZone": "America/New_York",
        "deviceTools": [],
    }


def test_the_instructions_name_the_device_tools_the_turn_may_use(workers, api, rebyte_double):
    device_id = register_device(api)
    body = {"clientMessageId": "m-1", "text": "ring my phone", "deviceId": device_id, "clientContext": TOKYO}

    completed(api.post("/api/v1/conversation/messages", body, format="json").json()["submissionId"])

    assert session_context(rebyte_double) == {**TOKYO, "deviceTools": ["play_sound"]}
