"""The turn's reasoning summaries, read from the live stream, projected as transient progress (`run.progress`).

Only the live stream carries them as they are written, and they are transient: the truth (the items) is not read
for them, a run resumed by another worker shows only what its reasoning says from then on, and a run's end drops
what was not projected yet (its reply replaces them). Each summary part (an item id and a summary index) is one
step. A part whose start this stream did not see is placed only by its `done` events, which carry its whole text.
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


class Summaries:
    def __init__(self):
        self._read: dict[str, str] = {}  # step id -> its text as read so far
        self._said: dict[str, int] = {}  # step id -> characters projected
        self._ended: set[str] = set()

    def read(self, event) -> tuple[str, str, bool] | None:
        """(step id, text so far, whether it ended) of a summary event; None for a delta it cannot place."""
        step = f"thinking-{event.item_id}-{event.summary_index}"
        if event.type == "agent.session.turn.reasoning_summary_text.delta":
            if step not in self._read:
                return None
            text = self._read[step] + event.delta
        elif event.type == "agent.session.turn.reasoning_summary_text.done":
            text = event.text
        else:  # a part added (usually empty) or done (whole)
            text = event.part.text
        self._read[step] = text
        return step, text, event.type.endswith(".done")

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
