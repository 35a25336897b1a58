"""The turn's reasoning summaries, read from the live stream, projected as transient progress (`run.progress`).

Each summary part (a reasoning item's id and a summary index) is one step. The live stream carries it as it is
written; a part whose start this stream did not see (the first turn of a session created with its input, whose
stream opens after the create) cannot take its deltas, so, as for the reply's text, the items are read for it: a
reasoning item holds its summary so far. Progress is transient: a run's end drops what was not projected yet (its
reply replaces it), and a run resumed under a new claim shows only what its own stream reads.
"""

from runtime.services import projection

SUMMARY_EVENTS = frozenset(
    {
        "agent.session.turn.reasoning_summary_part.added",
        "agent.session.turn.reasoning_summary_text.delta",
        "agent.session.turn.reasoning_summary_text.done",
        "agent.session.turn.reasoning_summary_part.done",
    }
)


def step_id(item_id: str, summary_index: int) -> str:
    return f"thinking-{item_id}-{summary_index}"


def steps_of(items: list) -> dict[str, tuple[str, bool]]:
    """(text so far, whether it ended) of every summary part of these items (a read of the truth)."""
    return {
        step_id(item.id, index): (part.text, item.status == "completed")
        for item in items
        if item.type == "reasoning"
        for index, part in enumerate(item.summary)
    }


class Summaries:
    def __init__(self):
        self._read: dict[str, str] = {}  # step id -> its text as read so far
        self._said: dict[str, int] = {}  # step id -> characters projected
        self._ended: set[str] = set()

    def read(self, event) -> tuple[str, str, bool] | None:
        """(step id, text so far, whether it ended) of a summary event; None for a delta it cannot place."""
        step = step_id(event.item_id, event.summary_index)
        text = event.text  # a delta's new text, or the part's whole text so far (added, usually empty; done)
        if event.type == "agent.session.turn.reasoning_summary_text.delta":
            if step not in self._read:
                return None
            text = self._read[step] + text
        self._read[step] = text
        return step, text, event.type.endswith(".done")

    @property
    def said_any(self) -> bool:
        """Whether this stream's reasoning was projected at all."""
        return bool(self._said)

    def unsaid(self, steps: dict[str, tuple[str, bool]]) -> list[projection.Progress]:
        """What the steps say that was not projected yet, counted as said (a failed projection loses the run's
        lease: nobody projects for it again)."""
        progress = []
        for step, (text, done) in steps.items():
            said = self._said.get(step, 0)
            ends = done and step not in self._ended
            if len(text) > said or ends:
                progress.append(projection.Progress(step, text[said:], completed_text=text if ends else None))
                self._said[step] = max(said, len(text))
            if ends:
                self._ended.add(step)
        return progress
