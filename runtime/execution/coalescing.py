"""A run's reply text between two projections: the turn's first text goes at once, later text together.

The driver feeds it what the live stream and the reads of the truth bring for each item (both are prefixes of
the item's text, so the longer is the newer) and projects what it hands out: at once the first time, then at the
end of the window (IMPO_DELTA_WINDOW_SECONDS) in which text came, so a run streaming ten deltas a second writes at
most one projection per window, each with one `text.delta` per item, and clients read the same text in fewer,
larger pieces. The agent's progress (its reasoning summaries, by step) is held and let go the same way, in the
same projections.

Windows are the same for every run (multiples of the window on the machine's monotonic clock), not counted from
each run's own last projection: the streaming runs of a process hand their text over at the same moments, so its
group commit writes them in one transaction and pushes them in one channel-layer call per window, instead of a
trickle of small groups (bench/RESULTS.md). Text waits at most one window, half of one on average.
"""

import math
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
        # When what is held now began to be held, and whether anything of this run was projected yet.
        self._held_since = 0.0
        self._projected_once = False

    @property
    def pending(self) -> bool:
        return bool(self._pending or self._progress)

    def take(self, texts: Texts) -> None:
        """(text so far, whether complete) per item id."""
        self._hold(texts)
        _merge(self._pending, texts)

    def take_progress(self, steps: Texts) -> None:
        """(text so far, whether complete) per progress step."""
        self._hold(steps)
        _merge(self._progress, steps)

    def _hold(self, held: Texts) -> None:
        if held and not self.pending:
            self._held_since = time.monotonic()

    def window_left(self) -> float:
        """Until the end of the window in which what is held now came (0 for the turn's first text)."""
        if not self._projected_once:
            return 0.0
        window = settings.IMPO_DELTA_WINDOW_SECONDS
        window_end = (math.floor(self._held_since / window) + 1) * window
        return max(0.0, window_end - time.monotonic())

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
        """A projection of this run committed: later text waits for the end of its window."""
        self._projected_once = True
