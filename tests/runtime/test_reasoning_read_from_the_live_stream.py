"""The worker's reading of reasoning summary events into transient progress steps: each event made as the SDK's model,
read as the live stream reads it (its JSON, into the driver's record)."""

from openai.types.beta import (
    AgentSessionTurnReasoningSummaryPartAddedEvent,
    AgentSessionTurnReasoningSummaryTextDeltaEvent,
    AgentSessionTurnReasoningSummaryTextDoneEvent,
)

from rebyte.live_event import from_raw
from runtime.execution.reasoning import Summaries
from runtime.services.projection import Progress

IDS = {"event_id": "evt", "item_id": "rs_1", "output_index": 1, "session_id": "sess", "summary_index": 0}


def added():
    part = {"type": "summary_text", "text": ""}
    return from_raw(
        AgentSessionTurnReasoningSummaryPartAddedEvent(
            type="agent.session.turn.reasoning_summary_part.added", part=part, **IDS
        ).model_dump(mode="json")
    )


def delta(text):
    return from_raw(
        AgentSessionTurnReasoningSummaryTextDeltaEvent(
            type="agent.session.turn.reasoning_summary_text.delta", delta=text, **IDS
        ).model_dump(mode="json")
    )


def done(text):
    return from_raw(
        AgentSessionTurnReasoningSummaryTextDoneEvent(
            type="agent.session.turn.reasoning_summary_text.done", text=text, **IDS
        ).model_dump(mode="json")
    )


def test_a_part_seen_from_its_start_is_read_delta_by_delta_and_said_once():
    summaries = Summaries()
    read = [summaries.read(event) for event in (added(), delta("**Plan**"), delta(" it"))]

    assert read[-1] == ("thinking-rs_1-0", "**Plan** it", False)
    assert summaries.unsaid({"thinking-rs_1-0": read[-1][1:]}) == [Progress("thinking-rs_1-0", "**Plan** it")]
    ended = summaries.read(done("**Plan** it"))
    assert summaries.unsaid({ended[0]: ended[1:]}) == [Progress("thinking-rs_1-0", "", completed_text="**Plan** it")]
    assert summaries.unsaid({ended[0]: ended[1:]}) == []


def test_a_delta_of_a_part_whose_start_was_missed_is_left_to_its_done_event():
    summaries = Summaries()

    assert summaries.read(delta(" the middle")) is None
    step = summaries.read(done("From the start, the middle"))
    assert summaries.unsaid({step[0]: step[1:]}) == [
        Progress("thinking-rs_1-0", "From the start, the middle", completed_text="From the start, the middle")
    ]
