"""`GET /api/v1/submissions/{id}/stream` served by the web server, read raw and by the AI SDK's own parser."""

import json
import shutil
import subprocess
import threading
from pathlib import Path

import httpx
from django.db import connection

from devtools.stack import start_web, wait_until
from runtime.models import Event, EventType, Run
from tests.client import event_types, post_message, send_message, token_of
from tests.devices import register_device

JS_DIR = Path(__file__).resolve().parent.parent / "js"


def read_stream(url: str, token: str) -> tuple[httpx.Headers, list]:
    """Every SSE data item in order (JSON chunks, and the closing '[DONE]' as a string)."""
    items = []
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                items.append(data if data == "[DONE]" else json.loads(data))
    return response.headers, items


def assert_well_formed(items: list) -> None:
    assert items[0]["type"] == "start"
    assert items[-2] == {"type": "finish"}
    assert items[-1] == "[DONE]"
    assert [item for item in items if item != "[DONE]" and item["type"] == "start"] == [items[0]]
    opened = set()
    for item in items[1:-1]:
        if item["type"] == "text-start":
            opened.add(item["id"])
        if item["type"] in ("text-delta", "text-end"):
            assert item["id"] in opened, "text block used before it was opened"


def text_of(items: list) -> str:
    return "".join(item["delta"] for item in items if item != "[DONE]" and item["type"] == "text-delta")


def completed(submission_id, state="completed") -> Run:
    return wait_until(
        lambda: (
            Run.objects.filter(submission_id=submission_id, state=state)
            .select_related("submission__assistant_message")
            .first()
        ),
        timeout=60,
        what=f"the run to be {state}",
    )


def ending(items: list) -> list:
    """The stream's last four items: `error`|`abort`, the final status, `finish`, `[DONE]`."""
    return [item if item == "[DONE]" else item["type"] for item in items[-4:]]


def final_status(items: list) -> str:
    return [item for item in items if item != "[DONE]" and item["type"] == "data-instant-submission"][-1]["data"][
        "status"
    ]


def read_with_the_ai_sdk(url: str, token: str) -> dict:
    result = subprocess.run(
        ["node", "read_ui_message_stream.mjs", url, token],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def cancelled_mid_reply(api, rebyte_double) -> str:
    """A run cancelled while its reply streams: its input was sent, so the remote turn is cancelled."""
    rebyte_double.configure(delta_delay_ms=200)
    submission_id = post_message(api, "/slow a reply that will be cut short")["submissionId"]
    wait_until(
        lambda: Event.objects.filter(submission_id=submission_id, type=EventType.TEXT_DELTA).exists(),
        timeout=30,
        what="the reply to start streaming",
    )
    api.post(f"/api/v1/submissions/{submission_id}/cancel", {}, format="json")
    completed(submission_id, "cancelled")
    return submission_id


def test_a_finished_submission_streams_a_complete_reconstruction(workers, shared_web, api, user):
    receipt = post_message(api, "stream me")
    run = completed(receipt["submissionId"])

    headers, items = read_stream(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))

    assert headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert headers["content-type"].startswith("text/event-stream")
    assert_well_formed(items)
    assert items[0]["messageId"] == str(run.submission.assistant_message_id)
    assert text_of(items) == "Echo: stream me"
    status = [item for item in items if item != "[DONE]" and item["type"] == "data-instant-submission"]
    assert status[-1]["data"] == {"schemaVersion": 1, "submissionId": receipt["submissionId"], "status": "completed"}


def test_subscribers_opening_mid_stream_each_get_the_whole_message(workers, shared_web, api, user, rebyte_double):
    # One character every half second: the reply streams for ~15 s, far longer than the subscribers
    # need to open and register, so they surely join mid-stream even on a loaded machine.
    rebyte_double.configure(delta_delay_ms=50)
    receipt = post_message(api, "/slow several listeners at once")
    wait_until(
        lambda: Event.objects.filter(submission_id=receipt["submissionId"], type=EventType.TEXT_DELTA).exists(),
        timeout=30,
        what="the reply to start streaming",
    )
    url = f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream"
    token = token_of(user)
    results = []
    readers = [threading.Thread(target=lambda: results.append(read_stream(url, token)[1])) for _ in range(2)]
    for reader in readers:
        reader.start()
    wait_until(
        lambda: api.get(f"/api/v1/submissions/{receipt['submissionId']}").json()["subscriberCount"] == 2,
        timeout=30,
        what="both subscribers to register",
    )
    assert Run.objects.get(submission_id=receipt["submissionId"]).state == "running"  # they joined mid-stream
    for reader in readers:
        reader.join(timeout=60)

    assert len(results) == 2
    for items in results:
        assert_well_formed(items)
        assert text_of(items) == "Echo: several listeners at once"


def test_closing_a_stream_does_not_cancel_the_run(workers, shared_web, api, user, rebyte_double):
    rebyte_double.configure(delta_delay_ms=200, delta_chunks=6)
    receipt = post_message(api, "keep going")
    url = f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream"
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token_of(user)}"}, timeout=30) as response:
        next(response.iter_lines())

    assert completed(receipt["submissionId"]).submission.assistant_message.text == "Echo: keep going"


def test_another_users_stream_is_not_found_and_no_token_is_unauthorized(workers, shared_web, api, other_user):
    receipt = post_message(api, "private")
    url = f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream"

    foreign = httpx.get(url, headers={"Authorization": f"Bearer {token_of(other_user)}"})
    anonymous = httpx.get(url)

    assert foreign.status_code == 404
    assert foreign.json()["error"]["code"] == "not_found"
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"


def test_the_ai_sdk_reader_rebuilds_the_message_the_history_endpoint_returns(workers, shared_web, api, user):
    assert shutil.which("node"), (
        "node is part of the machine image (docs/testing.md 'What the machine needs'); without it this test cannot run"
    )
    receipt = post_message(api, "parse me with the real SDK")
    completed(receipt["submissionId"])

    parsed = read_with_the_ai_sdk(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))
    assert parsed["finished"] is True
    history = api.get("/api/v1/conversation").json()
    [assistant] = [m for m in history["messages"] if m["role"] == "assistant"]
    assert parsed["header"] == "v1"
    assert parsed["message"]["id"] == assistant["id"]
    text = "".join(part["text"] for part in parsed["message"]["parts"] if part["type"] == "text")
    assert text == assistant["text"] == "Echo: parse me with the real SDK"


def test_a_failed_runs_stream_ends_with_error_status_finish_and_done(workers, shared_web, api, user):
    receipt = post_message(api, "/fail the model broke")
    completed(receipt["submissionId"], "failed")

    _, items = read_stream(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))

    assert ending(items) == ["error", "data-instant-submission", "finish", "[DONE]"]
    assert final_status(items) == "failed"


def test_a_cancelled_runs_stream_ends_with_abort_status_finish_and_done(workers, shared_web, api, user, rebyte_double):
    submission_id = cancelled_mid_reply(api, rebyte_double)

    _, items = read_stream(f"{shared_web}/api/v1/submissions/{submission_id}/stream", token_of(user))

    assert ending(items) == ["abort", "data-instant-submission", "finish", "[DONE]"]
    assert final_status(items) == "cancelled"


def test_a_live_stream_of_a_run_that_fails_ends_with_finish(workers, shared_web, api, user):
    receipt = post_message(api, "/fail broken while watched")
    reader, results = subscribed_reader(shared_web, api, user, receipt["submissionId"])
    reader.join(timeout=60)

    [items] = results
    assert "run.started" in event_types(receipt["submissionId"])
    assert ending(items) == ["error", "data-instant-submission", "finish", "[DONE]"]


def test_the_ai_sdk_reader_finishes_the_message_of_a_failed_run(workers, shared_web, api, user):
    receipt = post_message(api, "/fail the model broke")
    completed(receipt["submissionId"], "failed")

    parsed = read_with_the_ai_sdk(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))

    assert parsed["finished"] is True
    assert len(parsed["errors"]) == 1
    assert parsed["message"]["id"] == str(Run.objects.get().submission.assistant_message_id)


def test_the_ai_sdk_reader_finishes_the_message_of_a_cancelled_run(workers, shared_web, api, user, rebyte_double):
    submission_id = cancelled_mid_reply(api, rebyte_double)

    parsed = read_with_the_ai_sdk(f"{shared_web}/api/v1/submissions/{submission_id}/stream", token_of(user))

    assert parsed["finished"] is True
    assert parsed["aborted"] is True
    assert parsed["errors"] == []


def test_a_tool_phase_is_told_as_a_transient_step(workers, shared_web, api, user):
    receipt = post_message(api, '/tool current_time {"timeZone": "UTC"}')
    completed(receipt["submissionId"])

    parsed = read_with_the_ai_sdk(f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream", token_of(user))

    [tool_step] = [step for step in parsed["steps"] if step["kind"] == "tool"]
    assert tool_step["transient"] is True
    assert (tool_step["schemaVersion"], tool_step["title"], tool_step["status"]) == (
        1,
        "Running current_time",
        "completed",
    )
    assert tool_step["result"]["timeZone"] == "UTC"
    assert not [part for part in parsed["message"]["parts"] if part["type"] == "data-instant-step"]


def test_a_device_call_waiting_for_its_device_is_a_running_step_on_a_live_stream(workers, shared_web, api, user):
    device_id = register_device(api)
    receipt = send_message(
        api, '/tool play_sound {"sound": "chime"}', client_message_id="m-1", deviceId=device_id
    ).json()
    url = f"{shared_web}/api/v1/submissions/{receipt['submissionId']}/stream"

    step = first_step(url, token_of(user), kind="device")

    assert step["transient"] is True
    assert (step["data"]["title"], step["data"]["status"]) == ("Waiting for your device to run play_sound", "running")
    api.post(f"/api/v1/submissions/{receipt['submissionId']}/cancel", {}, format="json")


def test_a_stream_that_breaks_ends_with_error_and_done_but_no_finish(stack, api, user):
    _, web = start_web(stack)
    receipt = post_message(api, "no worker will take this")  # no worker: the stream keeps polling the log
    reader, results = subscribed_reader(web, api, user, receipt["submissionId"])

    # The event log becomes unreadable (a lost connection alone is replaced by the pool and does not break it).
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE runtime_event RENAME TO runtime_event_unreadable")
    try:
        reader.join(timeout=30)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE runtime_event_unreadable RENAME TO runtime_event")

    [items] = results
    assert [item if item == "[DONE]" else item["type"] for item in items[-2:]] == ["error", "[DONE]"]
    assert {"type": "finish"} not in items
    assert Run.objects.get(submission_id=receipt["submissionId"]).state == "queued"  # the run is untouched


def subscribed_reader(web, api, user, submission_id) -> tuple[threading.Thread, list]:
    """A thread reading the submission's stream to its end, started and registered as a subscriber."""
    url = f"{web}/api/v1/submissions/{submission_id}/stream"
    results = []
    reader = threading.Thread(target=lambda: results.append(read_stream(url, token_of(user))[1]))
    reader.start()
    # A run that ends fast may end the stream before a poll sees its subscriber: a finished reader counts too.
    wait_until(
        lambda: not reader.is_alive() or api.get(f"/api/v1/submissions/{submission_id}").json()["subscriberCount"] == 1,
        timeout=60,
        what="the subscriber to register",
    )
    return reader, results


def first_step(url: str, token: str, *, kind: str) -> dict:
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line.removeprefix("data: "))
                if chunk["type"] == "data-instant-step" and chunk["data"]["kind"] == kind:
                    return chunk
    raise AssertionError(f"the stream ended without a {kind} step")
