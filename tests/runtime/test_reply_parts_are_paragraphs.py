"""A reply the agent gives in several parts (the double's `/blocks`: two assistant messages in one turn) is one
message whose parts stay paragraphs of their own: a blank line between them, in its stored text and in the deltas
that spelled it, whether the parts came at once or streamed."""

import pytest

from rebyte.double.agent import TWO_BLOCKS
from tests.client import finished_run, post_message, streamed_text


@pytest.mark.parametrize("chunks", [1, 5])
def test_the_parts_of_a_reply_are_kept_apart_by_a_blank_line(workers, api, rebyte_double, chunks):
    rebyte_double.configure(delta_delay_ms=40, delta_chunks=chunks)

    receipt = post_message(api, "/blocks")

    run = finished_run(receipt["submissionId"])
    assert run.submission.assistant_message.text == "\n\n".join(TWO_BLOCKS)
    assert streamed_text(receipt["submissionId"]) == "\n\n".join(TWO_BLOCKS)
