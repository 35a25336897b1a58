"""A reply's reasoning kept on its message when its run ends: the history returns `reasoning: {text, seconds}` after
the run's `run.progress` events are gone, the terminal event carries the same, and a reply that did not reason has
none. A real worker drives replies from the double with reasoning summaries on."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from rebyte.double.agent import reasoning_summary
from runtime.execution.driver import execute_run, worker_identity
from runtime.models import Event, EventType, Message, Run, RunState
from runtime.services import claims, projection, retention
from runtime.services.admission import MessageCommand
from runtime.services.commands import submit_main_chat_message
from tests.client import history, post_message
from tests.realtime.test_submission_stream import completed

pytestmark = pytest.mark.django_db(transaction=True)


def last_reply(api) -> dict:
    return [message for message in history(api)["messages"] if message["role"] == "assistant"][-1]


def test_the_history_keeps_a_replys_reasoning_and_how_long_it_took_after_the_progress_is_compacted(
    workers, api, rebyte_double, settings
):
    rebyte_double.configure(reasoning_summaries=True, delta_chunks=4, delta_delay_ms=300)
    completed(post_message(api, "warm up", client_message_id="m-1")["submissionId"])
    run = completed(post_message(api, "think it over", client_message_id="m-2")["submissionId"])

    kept = {"text": reasoning_summary("think it over"), "seconds": last_reply(api)["reasoning"]["seconds"]}
    assert last_reply(api)["reasoning"] == kept
    assert 1 <= kept["seconds"] <= 30  # four paced deltas of the summary before the reply's first words
    ended = Event.objects.get(submission_id=run.submission_id, type=EventType.RUN_COMPLETED)
    assert ended.payload["reasoning"] == kept
    assert Message.objects.get(id=run.submission.assistant_message_id).text == "Echo: think it over"

    settings.IMPO_EVENT_RETENTION_SECONDS = 0
    retention.prune_events()
    assert not Event.objects.filter(submission_id=run.submission_id, type=EventType.RUN_PROGRESS).exists()
    assert last_reply(api)["reasoning"] == kept


def test_a_reply_that_did_not_reason_has_no_reasoning(workers, api, rebyte_double):
    run = completed(post_message(api, "just answer", client_message_id="m-1")["submissionId"])

    assert last_reply(api)["reasoning"] is None
    ended = Event.objects.get(submission_id=run.submission_id, type=EventType.RUN_COMPLETED)
    assert "reasoning" not in ended.payload


def test_a_run_ended_under_a_later_claim_keeps_the_reasoning_an_earlier_claim_projected(user, rebyte_double):
    # The run's end skips reading the reasoning only under the run's first claim, whose own stream projected none: a
    # successor's stream shows only what it reads, so what the claim before it projected is read at the end.
    receipt = submit_main_chat_message(owner=user, command=MessageCommand(client_message_id="m-1", text="think"))
    run = Run.objects.get(submission_id=receipt.submission_id)
    earlier = claims.claim_run(run.id, "worker-that-dies")
    thought = projection.Progress("thinking-r-0", "Weighing it.", completed_text="Weighing it.")
    with transaction.atomic(durable=True):
        assert claims.project_outputs_together([claims.LeasedOutput(earlier, [thought])])
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    execute_run(run.id, worker_identity())  # the successor, on a turn without reasoning summaries

    run.refresh_from_db()
    assert (run.state, run.lease_generation) == (RunState.COMPLETED, 2), run.error_message
    reply = Message.objects.get(id=receipt.reply_message_id)
    assert (reply.text, reply.reasoning) == ("Echo: think", "Weighing it.")
    ended = Event.objects.get(submission_id=run.submission_id, type=EventType.RUN_COMPLETED)
    assert ended.payload["reasoning"]["text"] == "Weighing it."
