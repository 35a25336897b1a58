"""The event log's retention window (docs/design.md §11, docs/data-lifecycle.md): compaction of settled runs' deltas.

The log is a replay buffer for clients. Once a run has been settled for `IMPO_EVENT_RETENTION_SECONDS`, its
`text.delta` events go: each part's `message.completed` event carries the whole text they added up to, so what is
kept still rebuilds the reply (the AI SDK stream of the run, the conversation's history), and every event another
app points at (webhook deliveries, their pending markers: run and approval events only) stays. Its `run.progress`
events go too, all of them: progress is transient, and the reply that replaced it is what stays.

A batch is one short transaction that never waits for a lock: it takes settled runs and their conversations with
SKIP LOCKED (a run staff are retrying, a conversation a writer holds this instant, or a batch another machine is
compacting are left to a later pass), removes their deltas, raises each conversation's `events_compacted_through`
above the seqs it removed and marks the runs done. Two pruners share the work; a crash loses only its own batch.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from runtime import locks
from runtime.models import TERMINAL_RUN_STATES, EventType

COMPACT_BATCH = 100

# A delta goes only when a later `message.completed` of its submission closes the same part: a run cancelled or
# failed mid-reply never completed its text, and keeps its deltas (its reply's only record on the stream). Progress
# goes whatever the run's end.
_COMPACT_SQL = f"""
WITH {locks.SETTLED_RUNS_TO_COMPACT_SQL},
removed AS (
    DELETE FROM runtime_event delta USING taken
    WHERE delta.submission_id = taken.submission_id AND (
        delta.type = %(progress)s
        OR (delta.type = %(delta)s AND EXISTS (
            SELECT 1 FROM runtime_event done
            WHERE done.submission_id = delta.submission_id AND done.type = %(completed)s AND done.seq > delta.seq
              AND done.payload->>'partId' = delta.payload->>'partId'
        ))
    )
    RETURNING delta.conversation_id, delta.seq
),
floor AS (
    UPDATE runtime_conversation conversation
    SET events_compacted_through = GREATEST(conversation.events_compacted_through, top.seq)
    FROM (SELECT conversation_id, max(seq) AS seq FROM removed GROUP BY conversation_id) top
    WHERE conversation.id = top.conversation_id
    RETURNING conversation.id
),
marked AS (
    UPDATE runtime_run run SET events_compacted_at = now() FROM taken WHERE run.id = taken.id RETURNING run.id
)
SELECT (SELECT count(*) FROM candidate), (SELECT count(*) FROM marked), (SELECT count(*) FROM removed)
"""


@dataclass(frozen=True)
class Compacted:
    runs: int
    events: int
    # Runs found but held by someone else this instant (left for a later pass).
    skipped: int = 0

    def __add__(self, other: "Compacted") -> "Compacted":
        return Compacted(self.runs + other.runs, self.events + other.events, self.skipped + other.skipped)


def compact_settled_runs(*, batch: int = COMPACT_BATCH, now=None) -> Compacted:
    """One batch: the deltas of up to `batch` runs settled longer than the retention window ago."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.IMPO_EVENT_RETENTION_SECONDS)
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(
            _COMPACT_SQL,
            {
                "settled": sorted(TERMINAL_RUN_STATES),
                "cutoff": cutoff,
                "batch": batch,
                "delta": EventType.TEXT_DELTA.value,
                "completed": EventType.MESSAGE_COMPLETED.value,
                "progress": EventType.RUN_PROGRESS.value,
            },
        )
        found, marked, removed = cursor.fetchone()
    return Compacted(runs=marked, events=removed, skipped=found - marked)


def prune_events(*, max_batches: int | None = None, batch: int = COMPACT_BATCH, now=None) -> Compacted:
    """One pass: batches until no run is left to compact (or `max_batches`); each batch commits on its own."""
    total = Compacted(0, 0)
    batches = 0
    while max_batches is None or batches < max_batches:
        done = compact_settled_runs(batch=batch, now=now)
        total += done
        batches += 1
        if done.runs == 0 or done.runs + done.skipped < batch:
            return total
    return total
