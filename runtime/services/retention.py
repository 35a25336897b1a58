"""The event log's retention window (docs/design.md §11, docs/data-lifecycle.md): compaction of settled runs' deltas.

The log is a replay buffer for clients. Once a run has been settled for `IMPO_EVENT_RETENTION_SECONDS`, its
`text.delta` events go: each part's `message.completed` event stands for the whole text they added up to, so what
is kept still rebuilds the reply (the AI SDK stream of the run, the conversation's history), and every event another
app points at (webhook deliveries, their pending markers: run and approval events only) stays. Its `run.progress`
events go too, all of them: progress is transient, and the reply that replaced it is what stays.

What stays no longer repeats what the rows hold: the submission's id (the event's own column) goes from
`submission.accepted`, `run.started` and the run's end; the ids and sequences of both messages and the user's
`text` from `submission.accepted`; the reply's id from its `message.completed` events and the run's end; and each
`message.completed` of a reply whose parts, in order, make its text exactly trades its `text` for `textRange`, the
[start, end) of its part in that text. Each goes only where it equals its row, so readers put back exactly what was
written (`runtime.wire.events_to_wire`, from the event's column and its submission's rows).

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
from runtime.models import RUN_END_EVENTS, TERMINAL_RUN_STATES, EventType

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
completed AS (
    SELECT done.id, done.submission_id, done.payload->>'text' AS text, done.payload->>'messageId' AS message_id,
           sum(char_length(done.payload->>'text')) OVER (PARTITION BY done.submission_id ORDER BY done.seq) AS upto
    FROM runtime_event done JOIN taken ON done.submission_id = taken.submission_id
    WHERE done.type = %(completed)s AND done.payload ? 'text'
),
whole AS (
    SELECT completed.submission_id
    FROM completed
    JOIN runtime_submission submission ON submission.id = completed.submission_id
    JOIN runtime_message reply ON reply.id = submission.assistant_message_id
    GROUP BY completed.submission_id, reply.id, reply.text
    HAVING string_agg(completed.text, '' ORDER BY completed.upto) = reply.text
       AND bool_and(completed.message_id = reply.id::text)
),
ranged AS (
    UPDATE runtime_event done
    SET payload = (done.payload - 'text' - 'messageId') || jsonb_build_object(
        'textRange', jsonb_build_array(completed.upto - char_length(completed.text), completed.upto)
    )
    FROM completed JOIN whole USING (submission_id)
    WHERE done.id = completed.id
    RETURNING done.id
),
accepted AS (
    UPDATE runtime_event accepted
    SET payload = accepted.payload - 'submissionId' - 'assistantMessage'
        #- '{{userMessage,id}}' #- '{{userMessage,sequence}}' #- '{{userMessage,text}}'
    FROM taken
    JOIN runtime_submission submission ON submission.id = taken.submission_id
    JOIN runtime_message asked ON asked.id = submission.user_message_id
    JOIN runtime_message reply ON reply.id = submission.assistant_message_id
    WHERE accepted.submission_id = taken.submission_id AND accepted.type = %(accepted)s
      AND accepted.payload @> jsonb_build_object(
          'submissionId', submission.id::text,
          'userMessage', jsonb_build_object('id', asked.id::text, 'sequence', asked.sequence, 'text', asked.text),
          'assistantMessage', jsonb_build_object('id', reply.id::text, 'sequence', reply.sequence)
      )
    RETURNING accepted.id
),
started AS (
    UPDATE runtime_event started SET payload = started.payload - 'submissionId'
    FROM taken
    WHERE started.submission_id = taken.submission_id AND started.type = %(started)s
      AND started.payload @> jsonb_build_object('submissionId', taken.submission_id::text)
    RETURNING started.id
),
ended AS (
    UPDATE runtime_event ended SET payload = ended.payload - 'submissionId' - 'messageId'
    FROM taken JOIN runtime_submission submission ON submission.id = taken.submission_id
    WHERE ended.submission_id = taken.submission_id AND ended.type = ANY(%(ends)s::varchar[])
      AND ended.payload @> jsonb_build_object(
          'submissionId', submission.id::text, 'messageId', submission.assistant_message_id::text
      )
    RETURNING ended.id
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


def compact_parameters(*, cutoff, batch: int) -> dict:
    """The compaction statement's parameters: runs settled before `cutoff`, `batch` of them at most."""
    return {
        "settled": sorted(TERMINAL_RUN_STATES),
        "cutoff": cutoff,
        "batch": batch,
        "delta": EventType.TEXT_DELTA.value,
        "completed": EventType.MESSAGE_COMPLETED.value,
        "progress": EventType.RUN_PROGRESS.value,
        "accepted": EventType.SUBMISSION_ACCEPTED.value,
        "started": EventType.RUN_STARTED.value,
        "ends": sorted(RUN_END_EVENTS),
    }


def compact_settled_runs(*, batch: int = COMPACT_BATCH, now=None) -> Compacted:
    """One batch: the deltas of up to `batch` runs settled longer than the retention window ago."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.IMPO_EVENT_RETENTION_SECONDS)
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(_COMPACT_SQL, compact_parameters(cutoff=cutoff, batch=batch))
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
