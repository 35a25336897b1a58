"""A run's end beyond the run and its event (`lifecycle.finish`), in one statement: the reply's message settles, its
owner's notification is written, and the conversation's next queued run is named, to be woken. Every turn ends, so
each statement saved here is saved on every turn (docs/design.md §5).
"""

import uuid

from django.db import connection

from runtime.models import MessageStatus, NotificationKind, Run, RunState

_NOTIFICATION = {
    RunState.COMPLETED: NotificationKind.COMPLETED,
    RunState.FAILED: NotificationKind.FAILED,
    RunState.CANCELLED: NotificationKind.CANCELLED,
}
_MESSAGE_STATUS = {
    RunState.COMPLETED: MessageStatus.COMPLETED,
    RunState.FAILED: MessageStatus.FAILED,
    RunState.CANCELLED: MessageStatus.CANCELLED,
}

# The reply's last text is appended; a text left as it was keeps its stored value, not a copy. The notification is
# written at most once per run and kind, as `lifecycle.notify_owner` writes it.
_ENDED_SQL = """
WITH reply AS (
    UPDATE runtime_message
    SET status = %(status)s::varchar, reasoning = %(reasoning)s::text, reasoning_seconds = %(seconds)s::integer,
        updated_at = %(now)s::timestamptz,
        text = CASE WHEN %(text_left)s::text = '' THEN text ELSE text || %(text_left)s::text END
    WHERE id = %(message)s::uuid
),
notified AS (
    INSERT INTO runtime_notification (id, run_id, kind, created_at, dispatched_at)
    SELECT %(notification)s::uuid, %(run)s::uuid, %(kind)s::varchar, %(now)s::timestamptz, NULL
    WHERE %(notify)s::boolean
    ON CONFLICT DO NOTHING
)
SELECT run.id
FROM runtime_run run
JOIN runtime_submission submission ON submission.id = run.submission_id
JOIN runtime_message message ON message.id = submission.user_message_id
WHERE submission.conversation_id = %(conversation)s::uuid AND run.state = %(queued)s::varchar
    AND run.id <> %(run)s::uuid
ORDER BY message.sequence
LIMIT 1
"""


def write_run_end(run: Run, state: str, *, now, reasoning: dict | None, reply_text_left: str, notify: bool):
    """Inside the transaction that ends the locked `run` in `state`; `reasoning` as `kept_reasoning` gives it,
    `notify`: whether its owner is told. Returns the id of the conversation's next queued run, or None."""
    with connection.cursor() as cursor:
        cursor.execute(
            _ENDED_SQL,
            {
                "status": _MESSAGE_STATUS[state],
                "reasoning": reasoning["text"] if reasoning else "",
                "seconds": reasoning["seconds"] if reasoning else None,
                "now": now,
                "text_left": reply_text_left,
                "message": run.submission.assistant_message_id,
                "notification": uuid.uuid4(),
                "run": run.id,
                "kind": _NOTIFICATION[state],
                "notify": notify,
                "conversation": run.submission.conversation_id,
                "queued": RunState.QUEUED,
            },
        )
        following = cursor.fetchone()
    return following[0] if following else None
