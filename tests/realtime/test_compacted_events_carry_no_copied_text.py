"""After the retention window, a settled reply's kept events no longer repeat what its rows hold (texts, ids,
sequences: runtime/services/retention.py), and every reader puts it back: the socket's catch-up, the AI SDK stream and
the history give the same transcript after a reload as before the compaction.

Real worker processes drive real replies from the double; real PostgreSQL and the web server serve them."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from impo.asgi import application
from runtime import selectors
from runtime.models import Conversation, Event, EventType
from runtime.services import retention
from tests.client import token_of
from tests.realtime.test_event_log_retention import history, reply, socket_path, transcript
from tests.realtime.test_submission_stream import read_stream, text_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def streamed_replies(rebyte_double, settings):
    rebyte_double.configure(delta_chunks=8, delta_delay_ms=100)
    settings.IMPO_EVENT_RETENTION_SECONDS = 0


async def _caught_up(token, conversation_id, after, last_seq) -> list[dict]:
    """What a reloaded page's socket is sent from `after` on, until it is caught up."""
    communicator = WebsocketCommunicator(application, socket_path(token, conversation_id, after))
    assert (await communicator.connect())[0]
    frames = []
    while not frames or frames[-1]["seq"] < last_seq:
        frames.append(await communicator.receive_json_from(timeout=30))
    await communicator.disconnect()
    return frames


def test_a_pruned_reply_reads_the_same_everywhere_after_a_reload(stack, web, api, user, streamed_replies):
    stack.start_worker()
    runs = [reply(api, "tell me about the sea", "m-1"), reply(api, "and about the sky", "m-2")]
    conversation_id = runs[0].submission.conversation_id
    token = token_of(user)
    log_before = {event["seq"]: event for event in selectors.events_after(conversation_id, 0, limit=10_000)}
    history_before = history(api)
    streams_before = [read_stream(f"{web}/api/v1/submissions/{run.submission_id}/stream", token)[1] for run in runs]

    assert retention.prune_events().runs == len(runs)

    # Stored without the copies: the event's column and its submission's message rows hold them.
    kept = Event.objects.filter(conversation_id=conversation_id)
    for event in kept.filter(type=EventType.SUBMISSION_ACCEPTED):
        assert event.payload == {"status": "queued", "userMessage": {}}
    for event in kept.filter(type=EventType.MESSAGE_COMPLETED):
        assert set(event.payload) == {"partId", "textRange"}
    for event in kept.filter(type__in=[EventType.RUN_STARTED, EventType.RUN_COMPLETED]):
        assert not {"submissionId", "messageId"} & set(event.payload), event.payload
    assert kept.filter(type=EventType.RUN_COMPLETED).count() == len(runs)
    # Read back whole: every event kept is what it was before, over the log a reloaded socket resumes from.
    log_after = selectors.events_after(conversation_id, 0, limit=10_000)
    assert log_after == [log_before[event["seq"]] for event in log_after]
    compacted_through = Conversation.objects.get(id=conversation_id).events_compacted_through
    last_seq = max(log_before)
    frames = async_to_sync(_caught_up)(token, str(conversation_id), compacted_through, last_seq)
    assert frames == [log_before[frame["seq"]] for frame in frames]
    assert transcript(history(api)) == transcript(history_before)
    for run, before in zip(runs, streams_before, strict=True):
        after = read_stream(f"{web}/api/v1/submissions/{run.submission_id}/stream", token)[1]
        assert text_of(after) == text_of(before) == run.submission.assistant_message.text


def test_a_reply_whose_parts_do_not_make_its_text_keeps_them(stack, api, streamed_replies):
    """Only a reply whose parts, in order, are its message's text exactly gives them up for ranges of it."""
    stack.start_worker()
    run = reply(api, "keep my parts", "m-1")
    completion = Event.objects.get(submission_id=run.submission_id, type=EventType.MESSAGE_COMPLETED)
    completion.payload["text"] += " (said differently)"
    completion.save(update_fields=["payload"])

    retention.prune_events()

    completion.refresh_from_db()
    assert completion.payload["text"].endswith(" (said differently)") and "textRange" not in completion.payload


def test_an_event_whose_ids_are_not_its_rows_keeps_them(stack, api, streamed_replies):
    """An id or a sequence goes only where it equals its row, so what is put back is always what was written."""
    stack.start_worker()
    run = reply(api, "keep my ids", "m-1")
    accepted = Event.objects.get(submission_id=run.submission_id, type=EventType.SUBMISSION_ACCEPTED)
    accepted.payload["assistantMessage"]["sequence"] += 10
    accepted.save(update_fields=["payload"])
    written = selectors.submission_events_after(run.submission_id, 0)

    retention.prune_events()

    accepted.refresh_from_db()
    assert accepted.payload["assistantMessage"]["id"] == str(run.submission.assistant_message_id)
    assert "submissionId" in accepted.payload and "text" in accepted.payload["userMessage"]
    kept = selectors.submission_events_after(run.submission_id, 0)
    assert kept == [event for event in written if event["type"] not in (EventType.TEXT_DELTA, EventType.RUN_PROGRESS)]


def test_events_compacted_before_the_ids_went_still_read_whole(stack, api, streamed_replies):
    """A reply compacted when only texts went (its events still name their ids) reads back as it was written."""
    stack.start_worker()
    run = reply(api, "compacted long ago", "m-1")
    written = selectors.submission_events_after(run.submission_id, 0)
    retention.prune_events()
    # As the earlier pass left them: the texts out, the ids in.
    for event in Event.objects.filter(submission_id=run.submission_id):
        as_written = next(wire["payload"] for wire in written if wire["seq"] == event.seq)
        event.payload = {key: value for key, value in as_written.items() if key != "text"}
        if event.type == EventType.SUBMISSION_ACCEPTED:
            event.payload["userMessage"] = {k: v for k, v in as_written["userMessage"].items() if k != "text"}
        elif event.type == EventType.MESSAGE_COMPLETED:
            event.payload["textRange"] = [0, len(as_written["text"])]
        event.save(update_fields=["payload"])

    kept = selectors.submission_events_after(run.submission_id, 0)
    assert kept == [event for event in written if event["type"] not in (EventType.TEXT_DELTA, EventType.RUN_PROGRESS)]
