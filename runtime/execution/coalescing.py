"""A run's reply text between two projections: the turn's first text goes at once, later text together.

The driver feeds it what the live stream and the reads of the truth bring for each item (both are prefixes of
the item's text, so the longer is the newer) and projects what it hands out: at once the first time, then once
the window (IMPO_DELTA_WINDOW_SECONDS) since the previous projection has passed, so a run streaming ten deltas a
second writes a few transactions a second, each with one `text.delta` per item, and clients read the same text
in fewer, larger pieces. The agent's progress (its reasoning summaries, by step) is held and let go the same way,
in the same projections.
"""

import time

from django.conf import settings

Texts = dict[str, tuple[str, bool]]


def _merge(into: Texts, texts: Texts) -> None:
    for key, (text, done) in texts.items():
        known, known_done = into.get(key, ("", False))
        into[key] = (text if len(text) >= len(known) else known, done or known_done)


class Coalescer:
    def __init__(self):
        self._pending: Texts = {}
        self._progress: Texts = {}
        self._projected_at: float | None = None

    @property
    def pending(self) -> bool:
        return bool(self._pending or self._progress)

    def take(self, texts: Texts) -> None:
        """(text so far, whether complete) per item id."""
        _merge(self._pending, texts)

    def take_progress(self, steps: Texts) -> None:
        """(text so far, whether complete) per progress step."""
        _merge(self._progress, steps)

    def window_left(self) -> float:
        if self._projected_at is None:
            return 0.0
        return max(0.0, self._projected_at + settings.IMPO_DELTA_WINDOW_SECONDS - time.monotonic())

    def wait_seconds(self, longest: float) -> float:
        """How long the driver may wait for more before what it holds is due."""
        return min(longest, self.window_left()) if self.pending else longest

    def due(self, *, at_once: bool = False) -> tuple[Texts, Texts] | None:
        """What to project now (and forget here): the texts and the progress steps; None while the window holds
        them back."""
        if not at_once and self.window_left() > 0:
            return None
        texts, self._pending = self._pending, {}
        steps, self._progress = self._progress, {}
        return texts, steps

    def projected(self) -> None:
        """A projection of this run committed: the next window starts now."""
        self._projected_at = time.monotonic()
