"""The agent's reasoning summaries as transient progress: `run.progress` events on the websocket, `reasoning` parts
on the AI SDK stream (read by the SDK's own reader), never in the reply's text, and gone with the deltas once the run
settled past the retention window.

A real worker drives replies from the double with reasoning summaries on; the second message of the conversation
goes to the session the first one created, whose live stream the worker opened before sending it (so it reads every
summary event, as it would from the real service)."""

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from impo.asgi import application
from rebyte.double.agent import reasoning_summary
from runtime.models import Event, EventType
from runtime.services import retention
from tests.client import post_message, socket_path, token_of, web_client
from tests.realtime.test_submission_stream import (
    completed,
    read_stream,
    read_with_the_ai_sdk,
    subscribed_reader,
    text_of,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reasoning_replies(rebyte_double):
    """Summaries and replies of four deltas each, far enough apart that each is an event of its own."""
    rebyte_double.configure(reasoning_summaries=True, delta_chunks=4, delta_delay_ms=150)


def second_reply(api, text: str):
    completed(post_message(api, "warm up", client_message_id="m-1")["submissionId"])
    return completed(post_message(api, text, client_message_id="m-2")["submissionId"])


def followed_on_a_socket(user, web, conversation_id, text: str) -> tuple[str, list[dict]]:
    """Posts `text` to Main Chat while a websocket of its conversation is open, and reads the socket live until the
    run ends: the submission id and the events of that submission."""
    token = token_of(user)
    after = Event.objects.filter(conversation_id=conversation_id).order_by("-seq").values_list("seq", flat=True)[0]

    async def read():
        communicator = WebsocketCommunicator(application, socket_path(conversation_id, token, after=str(after)))
        connected, _ = await communicator.connect()
        assert connected
        with web_client(web, token) as client:
            receipt = await asyncio.to_thread(post_message, client, text, client_message_id="m-2")
        frames = []
        while not frames or frames[-1]["type"] != EventType.RUN_COMPLETED:
            frame = json.loads(await communicator.receive_from(timeout=30))
            if frame["submissionId"] == receipt["submissionId"]:
                frames.append(frame)
        await communicator.disconnect()
        return receipt["submissionId"], frames

    return async_to_sync(read)()


def test_the_websocket_carries_the_reasoning_live_as_progress_before_the_reply_and_the_transcript_has_none(
    workers, shared_web, api, user, reasoning_replies
):
    warm_up = completed(post_message(api, "warm up", client_message_id="m-1")["submissionId"])

    submission_id, frames = followed_on_a_socket(user, shared_web, warm_up.submission.conversation_id, "think first")

    run = completed(submission_id)
    summary = reasoning_summary("think first")
    progress = [frame for frame in frames if frame["type"] == EventType.RUN_PROGRESS]
    assert len(progress) >= 2  # coalesced, not one event per provider delta nor a single one at the end
    assert {frame["payload"]["stepId"] for frame in progress} == {progress[0]["payload"]["stepId"]}
    assert {frame["payload"]["messageId"] for frame in progress} == {str(run.submission.assistant_message_id)}
    assert {frame["payload"]["kind"] for frame in progress} == {"thinking"}
    assert "".join(frame["payload"]["delta"] for frame in progress) == summary
    assert [frame["payload"]["status"] for frame in progress][-1] == "completed"
    assert progress[-1]["payload"]["text"] == summary and "text" not in progress[0]["payload"]
    types = [frame["type"] for frame in frames]
    assert max(i for i, kind in enumerate(types) if kind == EventType.RUN_PROGRESS) < types.index(EventType.TEXT_DELTA)
    # The reply is the echo alone: in its deltas, its completion and the history, where the reasoning is kept apart.
    deltas = "".join(frame["payload"]["delta"] for frame in frames if frame["type"] == EventType.TEXT_DELTA)
    [completion] = [frame["payload"]["text"] for frame in frames if frame["type"] == EventType.MESSAGE_COMPLETED]
    assistant = [m for m in api.get("/api/v1/conversation").json()["messages"] if m["role"] == "assistant"]
    assert deltas == completion == assistant[-1]["text"] == "Echo: think first"
    reply_but_its_reasoning = {key: value for key, value in assistant[-1].items() if key != "reasoning"}
    assert "Reading the message" not in json.dumps(reply_but_its_reasoning)
    assert assistant[-1]["reasoning"]["text"] == summary


def test_the_first_message_of_a_conversation_shows_its_reasoning_while_it_is_written(
    workers, api, rebyte_double, reasoning_replies
):
    # Its session is created with it, so the worker's stream opens after the summary began: the items have it.
    rebyte_double.configure(delta_delay_ms=500)
    run = completed(post_message(api, "first thoughts")["submissionId"])

    progress = list(
        Event.objects.filter(submission_id=run.submission_id, type=EventType.RUN_PROGRESS)
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    assert progress[0]["status"] == "running"
    assert "".join(payload["delta"] for payload in progress) == progress[-1]["text"]
    assert progress[-1]["text"] == reasoning_summary("first thoughts")


def test_the_sse_stream_tells_the_reasoning_as_a_reasoning_part_before_the_text(
    workers, shared_web, api, user, reasoning_replies
):
    run = second_reply(api, "reason aloud")

    _, items = read_stream(f"{shared_web}/api/v1/submissions/{run.submission_id}/stream", token_of(user))

    chunks = [item for item in items if item != "[DONE]"]
    kinds = [chunk["type"] for chunk in chunks]
    reasoning = [chunk for chunk in chunks if chunk["type"].startswith("reasoning-")]
    assert [chunk["type"] for chunk in reasoning] == ["reasoning-start", "reasoning-delta", "reasoning-end"]
    assert reasoning[1]["delta"] == reasoning_summary("reason aloud")  # a reconstruction sends it at once
    assert kinds.index("reasoning-end") < kinds.index("text-start")
    assert text_of(items) == "Echo: reason aloud"


def test_a_stream_followed_while_the_agent_reasons_gets_the_whole_reasoning_then_the_reply(
    workers, shared_web, api, user, rebyte_double, reasoning_replies
):
    completed(post_message(api, "warm up", client_message_id="m-1")["submissionId"])
    rebyte_double.configure(delta_delay_ms=400)  # the summary takes more than a second: the reader joins before
    receipt = post_message(api, "reason while watched", client_message_id="m-2")
    reader, results = subscribed_reader(shared_web, api, user, receipt["submissionId"])
    reader.join(timeout=60)

    [items] = results
    chunks = [item for item in items if item != "[DONE]"]
    kinds = [chunk["type"] for chunk in chunks]
    said = "".join(chunk["delta"] for chunk in chunks if chunk["type"] == "reasoning-delta")
    assert said == reasoning_summary("reason while watched")
    assert kinds.count("reasoning-start") == kinds.count("reasoning-end") == 1
    assert kinds.index("reasoning-end") < kinds.index("text-start") and kinds[-1] == "finish"
    assert text_of(items) == "Echo: reason while watched"


def test_the_ai_sdk_reader_keeps_the_reasoning_as_a_reasoning_part_beside_the_text(
    workers, shared_web, api, user, reasoning_replies
):
    run = second_reply(api, "parse my thoughts")

    parsed = read_with_the_ai_sdk(f"{shared_web}/api/v1/submissions/{run.submission_id}/stream", token_of(user))

    assert parsed["finished"] is True and parsed["errors"] == []
    parts = parsed["message"]["parts"]
    [thought] = [part for part in parts if part["type"] == "reasoning"]
    assert (thought["text"], thought["state"]) == (reasoning_summary("parse my thoughts"), "done")
    assert "".join(part["text"] for part in parts if part["type"] == "text") == "Echo: parse my thoughts"


def test_a_settled_runs_progress_goes_with_its_deltas_and_its_reply_stays_whole(
    workers, shared_web, api, user, reasoning_replies
):
    run = second_reply(api, "forget my thoughts")
    assert Event.objects.filter(submission_id=run.submission_id, type=EventType.RUN_PROGRESS).exists()

    with override_settings(IMPO_EVENT_RETENTION_SECONDS=0):
        retention.prune_events()

    kept = set(Event.objects.filter(submission_id=run.submission_id).values_list("type", flat=True))
    assert EventType.RUN_PROGRESS not in kept and EventType.TEXT_DELTA not in kept
    _, items = read_stream(f"{shared_web}/api/v1/submissions/{run.submission_id}/stream", token_of(user))
    assert not [item for item in items if item != "[DONE]" and item["type"].startswith("reasoning-")]
    assert text_of(items) == "Echo: forget my thoughts"
