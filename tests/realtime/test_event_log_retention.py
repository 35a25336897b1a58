"""The event log's retention window (docs/data-lifecycle.md): settled runs' deltas are compacted, and every reader
(the websocket, the AI SDK stream, the history) still ends with the same transcript, with no client waiting on a hole.

Real worker processes drive real replies from the double; real PostgreSQL, Redis and the web server serve them."""

import json
import shutil
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from devtools.stack import wait_until
from impo.asgi import application
from runtime import selectors
from runtime.models import Conversation, Event, EventType, Run
from runtime.realtime.consumers import EVENTS_COMPACTED_CLOSE_CODE
from runtime.services import retention
from tests.client import post_message, token_of
from tests.realtime.test_submission_stream import (
    assert_well_formed,
    completed,
    read_stream,
    read_with_the_ai_sdk,
    text_of,
)
from webhooks import services as webhook_services
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def streamed_replies(rebyte_double):
    """Replies of eight deltas each, far enough apart that each delta is an event of its own."""
    rebyte_double.configure(delta_chunks=8, delta_delay_ms=150)


@pytest.fixture
def window_passed(settings):
    """A retention window already over for every settled run."""
    settings.IMPO_EVENT_RETENTION_SECONDS = 0


def reply(api, text, client_message_id) -> Run:
    receipt = post_message(api, text, client_message_id=client_message_id)
    return completed(receipt["submissionId"])


def types_of(run: Run) -> list[str]:
    return list(Event.objects.filter(submission_id=run.submission_id).order_by("seq").values_list("type", flat=True))


def seqs_of(conversation_id) -> list[int]:
    return list(Event.objects.filter(conversation_id=conversation_id).order_by("seq").values_list("seq", flat=True))


def history(api) -> dict:
    return api.get("/api/v1/conversation").json()


def transcript(page: dict) -> list[tuple[str, str, str]]:
    return [(message["role"], message["text"], message["status"]) for message in page["messages"]]


def socket_path(token, conversation_id, after) -> str:
    return f"/ws/v1/conversations/{conversation_id}/?after={after}&token={token}"


async def frames_until_closed(communicator) -> tuple[list[dict], int | None]:
    """Every JSON frame until the server closes the socket, and the close code."""
    frames = []
    while True:
        output = await communicator.receive_output(timeout=30)
        if output["type"] == "websocket.close":
            return frames, output.get("code")
        frames.append(json.loads(output["text"]))


def test_a_settled_run_past_the_window_keeps_everything_but_its_deltas(stack, api, streamed_replies, window_passed):
    stack.start_worker()
    run = reply(api, "compact me", "m-1")
    before = types_of(run)
    assert before.count(EventType.TEXT_DELTA) >= 2

    compacted = retention.prune_events()

    assert compacted.runs == 1 and compacted.events == before.count(EventType.TEXT_DELTA)
    assert types_of(run) == [kind for kind in before if kind != EventType.TEXT_DELTA]
    run.refresh_from_db()
    assert run.events_compacted_at is not None
    conversation = Conversation.objects.get(id=run.submission.conversation_id)
    removed_top = max(set(range(1, conversation.last_event_seq + 1)) - set(seqs_of(conversation.id)))
    assert conversation.events_compacted_through == removed_top
    assert retention.prune_events().runs == 0  # done once


def test_runs_inside_the_window_and_unfinished_runs_keep_their_deltas(stack, api, rebyte_double, streamed_replies):
    stack.start_worker()
    settled = reply(api, "recent", "m-1")
    rebyte_double.configure(delta_delay_ms=2000)
    unfinished = post_message(api, "/slow still talking", client_message_id="m-2")
    wait_until(
        lambda: Event.objects.filter(submission_id=unfinished["submissionId"], type=EventType.TEXT_DELTA).exists(),
        timeout=30,
        what="the second reply to start streaming",
    )

    assert retention.prune_events().runs == 0  # the default window (an hour) is not over for the settled one
    with override_settings(IMPO_EVENT_RETENTION_SECONDS=0):
        retention.prune_events()

    assert EventType.TEXT_DELTA not in types_of(settled)
    assert Event.objects.filter(submission_id=unfinished["submissionId"], type=EventType.TEXT_DELTA).exists()


def test_a_run_cancelled_mid_reply_is_compacted_with_its_completion_keeping_the_text_it_had(
    stack, api, rebyte_double, streamed_replies, window_passed
):
    rebyte_double.configure(delta_delay_ms=200)
    stack.start_worker()
    receipt = post_message(api, "/slow a reply that will be cut short", client_message_id="m-1")
    wait_until(
        lambda: Event.objects.filter(submission_id=receipt["submissionId"], type=EventType.TEXT_DELTA).exists(),
        timeout=30,
        what="the reply to start streaming",
    )
    api.post(f"/api/v1/submissions/{receipt['submissionId']}/cancel", {}, format="json")
    run = completed(receipt["submissionId"], "cancelled")

    assert retention.prune_events().runs == 1
    [completion] = [
        event
        for event in selectors.submission_events_after(run.submission_id, 0)
        if event["type"] == EventType.MESSAGE_COMPLETED
    ]
    assert EventType.TEXT_DELTA not in types_of(run)
    assert completion["payload"]["text"] == run.submission.assistant_message.text != ""


def test_the_history_is_the_same_transcript_after_compaction_and_says_what_was_removed(
    stack, api, streamed_replies, window_passed
):
    stack.start_worker()
    reply(api, "first", "m-1")
    reply(api, "second", "m-2")
    before = history(api)
    assert before["eventsCompactedThrough"] == 0

    retention.prune_events()

    after = history(api)
    assert transcript(after) == transcript(before)
    assert after["lastEventSeq"] == before["lastEventSeq"]
    assert 0 < after["eventsCompactedThrough"] < after["lastEventSeq"]


def test_a_socket_resuming_below_the_window_is_told_to_reload_and_the_reload_resumes_cleanly(
    stack, api, user, streamed_replies, window_passed
):
    stack.start_worker()
    run = reply(api, "gone soon", "m-1")
    conversation_id = str(run.submission.conversation_id)
    token = token_of(user)
    retention.prune_events()

    async def resume(after):
        communicator = WebsocketCommunicator(application, socket_path(token, conversation_id, after))
        assert (await communicator.connect())[0]
        return await frames_until_closed(communicator)

    frames, code = async_to_sync(resume)(0)
    # Whatever precedes the hole is sent in order; then the signal, never a frame after a hole.
    *events, signal = frames
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert signal["type"] == "snapshot.reload" and code == EVENTS_COMPACTED_CLOSE_CODE

    # The reload: history, then the socket from its lastEventSeq, which hears the next reply whole.
    page = history(api)
    second = post_message(api, "after the reload", client_message_id="m-2")

    async def follow(after):
        communicator = WebsocketCommunicator(application, socket_path(token, conversation_id, after))
        assert (await communicator.connect())[0]
        received = []
        while not received or received[-1]["type"] != EventType.RUN_COMPLETED:
            received.append(await communicator.receive_json_from(timeout=30))
        await communicator.disconnect()
        return received

    received = async_to_sync(follow)(page["lastEventSeq"])
    assert [event["seq"] for event in received] == list(
        range(page["lastEventSeq"] + 1, page["lastEventSeq"] + 1 + len(received))
    )
    deltas = "".join(e["payload"]["delta"] for e in received if e["type"] == EventType.TEXT_DELTA)
    assert deltas == completed(second["submissionId"]).submission.assistant_message.text


def test_a_socket_connected_before_and_during_compaction_is_never_sent_a_hole(
    stack, api, user, streamed_replies, settings
):
    """A socket that is caught up never needs what compaction removes: it streams the next replies as before."""
    settings.IMPO_EVENT_RETENTION_SECONDS = 2
    stack.start_worker()
    first = reply(api, "one", "m-1")
    conversation_id = str(first.submission.conversation_id)
    token = token_of(user)
    caught_up_at = Conversation.objects.values_list("last_event_seq", flat=True).get(id=conversation_id)
    stop = threading.Event()
    pruned = []

    def pruner():
        try:
            while not stop.wait(0.1):
                pruned.append(retention.prune_events())
        finally:
            connection.close()

    async def reply_received(communicator, received, index):
        submission_id = await _post(api, f"reply {index}", f"m-{index}")
        while not (received[-1]["type"] == EventType.RUN_COMPLETED and received[-1]["submissionId"] == submission_id):
            received.append(await communicator.receive_json_from(timeout=30))

    async def scenario():
        communicator = WebsocketCommunicator(application, socket_path(token, conversation_id, 0))
        assert (await communicator.connect())[0]
        received = []
        while not received or received[-1]["seq"] < caught_up_at:
            received.append(await communicator.receive_json_from(timeout=30))
        thread = threading.Thread(target=pruner)
        thread.start()
        index = 2
        # Replies go on while the pruner compacts the earlier ones (each two seconds after it settled).
        while sum(batch.runs for batch in pruned) < 2:
            await reply_received(communicator, received, index)
            index += 1
        await reply_received(communicator, received, index)
        stop.set()
        thread.join()
        await communicator.disconnect()
        return received

    received = async_to_sync(scenario)()

    assert [event["seq"] for event in received] == list(range(1, len(received) + 1))
    assert all(event["type"] != "snapshot.reload" for event in received)


async def _post(api, text, client_message_id) -> str:
    return (await database_sync_to_async(post_message)(api, text, client_message_id=client_message_id))["submissionId"]


def test_the_ai_sdk_stream_of_a_compacted_run_still_ends_with_its_whole_text(
    stack, web, api, user, streamed_replies, window_passed
):
    assert shutil.which("node"), "node is part of the machine image (README); without it this test cannot run"
    stack.start_worker()
    run = reply(api, "read me whole", "m-1")
    url = f"{web}/api/v1/submissions/{run.submission_id}/stream"
    _, raw_before = read_stream(url, token_of(user))
    parsed_before = read_with_the_ai_sdk(url, token_of(user))

    retention.prune_events()

    _, raw_after = read_stream(url, token_of(user))
    parsed_after = read_with_the_ai_sdk(url, token_of(user))
    assert_well_formed(raw_after)
    assert text_of(raw_after) == text_of(raw_before) == run.submission.assistant_message.text
    assert parsed_after["finished"] is True
    assert parsed_after["message"] == parsed_before["message"]


def test_two_pruners_at_once_compact_each_run_once(stack, api, streamed_replies, window_passed):
    stack.start_worker()
    runs = [reply(api, f"reply {index}", f"m-{index}") for index in range(4)]
    deltas = Event.objects.filter(type=EventType.TEXT_DELTA).count()
    results = []

    def pruner():
        try:
            results.append(retention.prune_events(batch=1))
        finally:
            connection.close()

    threads = [threading.Thread(target=pruner) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # A run whose row or conversation someone holds at that instant (the worker finishing with it, the other pruner)
    # is skipped, left to a later pass: later passes take what the two left, and no run is compacted twice.
    def later_pass_leaves_no_delta() -> bool:
        results.append(retention.prune_events(batch=1))
        return not Event.objects.filter(type=EventType.TEXT_DELTA).exists()

    wait_until(
        later_pass_leaves_no_delta,
        timeout=60,
        interval=0.5,
        what="later passes to compact what the two pruners skipped",
    )

    assert sum(result.runs for result in results) == len(runs)
    assert sum(result.events for result in results) == deltas


def test_prune_events_runs_one_pass(stack, api, streamed_replies, window_passed, capsys):
    stack.start_worker()
    reply(api, "prune me", "m-1")

    call_command("prune_events")

    assert "compacted 1 runs" in capsys.readouterr().out
    assert not Event.objects.filter(type=EventType.TEXT_DELTA).exists()


def test_the_sweeper_compacts_settled_runs_once_their_window_is_over(stack, api, streamed_replies):
    stack.env["IMPO_EVENT_RETENTION_SECONDS"] = "1"
    stack.start_worker()
    stack.start_sweeper()
    run = reply(api, "swept", "m-1")

    wait_until(
        lambda: Run.objects.filter(id=run.id, events_compacted_at__isnull=False).exists(),
        timeout=30,
        what="the sweeper to compact the settled run",
    )
    assert EventType.TEXT_DELTA not in types_of(run)


def test_webhook_collection_after_compaction_still_finds_the_run_events_it_had_not_collected(
    stack, api, user, streamed_replies, window_passed
):
    endpoint = webhook_services.create_endpoint(
        owner=user, url="https://hooks.example.com/x", event_types=[EventType.RUN_COMPLETED.value]
    )
    stack.start_worker()
    run = reply(api, "tell my hook", "m-1")

    retention.prune_events()  # before the webhooks loop ever ran
    webhook_services.collect_deliveries()

    [delivery] = WebhookDelivery.objects.filter(endpoint=endpoint)
    assert delivery.event_type == EventType.RUN_COMPLETED
    assert delivery.payload["data"]["submissionId"] == str(run.submission_id)


def test_streams_read_before_between_and_after_each_runs_compaction_all_end_with_the_whole_text(
    stack, web, api, user, streamed_replies, window_passed
):
    stack.start_worker()
    runs = [reply(api, f"reply number {index}", f"m-{index}") for index in range(3)]
    token = token_of(user)
    reads = []
    for _ in range(len(runs) + 1):  # every stream read with none, one, two and all three runs compacted
        for run in runs:
            reads.append((run, read_stream(f"{web}/api/v1/submissions/{run.submission_id}/stream", token)[1]))
        retention.prune_events(batch=1, max_batches=1)

    assert Run.objects.filter(events_compacted_at__isnull=False).count() == len(runs)
    for run, items in reads:
        assert_well_formed(items)
        assert text_of(items) == run.submission.assistant_message.text
