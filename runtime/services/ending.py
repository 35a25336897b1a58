"""A run's end beyond the run and its event (`lifecycle.finish`), in one statement: the reply's message settles, its
owner's notification is written, and the conversation's next queued run is named, to be woken. Every turn ends, so
each statement saved here is saved on every turn (docs/design.md §5).
"""

import functools
import uuid

from django.db import connection
from django.db.models.expressions import RawSQL

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


def queued_after(conversation_id, run_id):
    """The ids of the conversation's queued runs other than `run_id`, the next to start first: a conversation's runs
    start in the order of their messages."""
    return (
        Run.objects.filter(submission__conversation_id=conversation_id, state=RunState.QUEUED)
        .exclude(id=run_id)
        .order_by("submission__user_message__sequence")
        .values_list("id", flat=True)
    )


# The reply's last text is appended; a text left as it was keeps its stored value, not a copy. The notification is
# written at most once per run and kind, as `lifecycle.notify_owner` writes it.
_ENDED = """
WITH ending AS (SELECT %s::uuid AS run, %s::uuid AS conversation),
reply AS (
    UPDATE runtime_message
    SET status = %s::varchar, reasoning = %s::text, reasoning_seconds = %s::integer, updated_at = %s::timestamptz,
        text = CASE WHEN %s::text = '' THEN text ELSE text || %s::text END
    WHERE id = %s::uuid
),
notified AS (
    INSERT INTO runtime_notification (id, run_id, kind, created_at, dispatched_at)
    SELECT %s::uuid, ending.run, %s::varchar, %s::timestamptz, NULL FROM ending
    WHERE %s::boolean
    ON CONFLICT DO NOTHING
)
"""


@functools.cache
def _ended_sql() -> tuple[str, tuple]:
    """The end's SQL and its following rule's fixed parameters, compiled once per process (compiling the ORM query
    costs more than running it). The run and its conversation are parameters of `ending`, so the rule names neither."""
    ending_conversation, ending_run = (
        RawSQL("(SELECT conversation FROM ending)", ()),
        RawSQL("(SELECT run FROM ending)", ()),
    )
    following_sql, following_params = queued_after(ending_conversation, ending_run)[:1].query.sql_with_params()
    return _ENDED + following_sql, following_params


def write_run_end(run: Run, state: str, *, now, reasoning: dict | None, reply_text_left: str, notify: bool):
    """Inside the transaction that ends the locked `run` in `state`; `reasoning` as `kept_reasoning` gives it,
    `notify`: whether its owner is told. Returns the id of the conversation's next queued run, or None."""
    sql, following_params = _ended_sql()
    message = [
        _MESSAGE_STATUS[state],
        reasoning["text"] if reasoning else "",
        reasoning["seconds"] if reasoning else None,
        now,
        reply_text_left,
        reply_text_left,
        run.submission.assistant_message_id,
    ]
    notification = [uuid.uuid4(), _NOTIFICATION[state], now, notify]
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.id, run.submission.conversation_id, *message, *notification, *following_params])
        following = cursor.fetchone()
    return following[0] if following else None
