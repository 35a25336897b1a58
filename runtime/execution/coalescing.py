"""A run's reply text between two projections: the turn's first text goes at once, later text together.

The driver feeds it what the live stream and the reads of the truth bring for each item (both are prefixes of
the item's text, so the longer is the newer) and projects what it hands out: at once the first time, then once
the window (IMPO_DELTA_WINDOW_SECONDS) since the previous projection has passed, so a run streaming ten deltas a
second writes a few transactions a second, each with one `text.delta` per item, and clients read the same text
in fewer, larger pieces.
"""

import time

from django.conf import settings


class Coalescer:
    def __init__(self):
        self._pending: dict[str, tuple[str, bool]] = {}
        self._projected_at: float | None = None

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def take(self, texts: dict[str, tuple[str, bool]]) -> None:
        """(text so far, whether complete) per item id."""
        for item_id, (text, done) in texts.items():
            known, known_done = self._pending.get(item_id, ("", False))
            self._pending[item_id] = (text if len(text) >= len(known) else known, done or known_done)

    def window_left(self) -> float:
        if self._projected_at is None:
            return 0.0
        return max(0.0, self._projected_at + settings.IMPO_DELTA_WINDOW_SECONDS - time.monotonic())

    def wait_seconds(self, longest: float) -> float:
        """How long the driver may wait for more before what it holds is due."""
        return min(longest, self.window_left()) if self._pending else longest

    def due(self, *, at_once: bool = False) -> dict[str, tuple[str, bool]] | None:
        """What to project now (and forget here), or None while the window holds it back."""
        if not at_once and self.window_left() > 0:
            return None
        texts, self._pending = self._pending, {}
        return texts

    def projected(self) -> None:
        """A projection of this run committed: the next window starts now."""
        self._projected_at = time.monotonic()
