"""Row locks of the runtime's conversations and runs, always in this order: Run rows (by id), then the
Conversation row. A worker ending a run holds the run and then appends its event, which locks the conversation;
taking them the other way round could deadlock against it.
"""

from django.db import connection

from runtime.models import ACTIVE_RUN_STATES, Run


def lock_unfinished_runs(conversation_id) -> list[Run]:
    """The conversation's unfinished runs, locked in id order, with their submissions."""
    return list(
        Run.objects.select_for_update(no_key=True, of=("self",))
        .select_related("submission")
        .filter(submission__conversation_id=conversation_id, state__in=ACTIVE_RUN_STATES)
        .order_by("id")
    )


def lock_conversation(conversation_id) -> str:
    """Locks the conversation row (the lock every event append takes) and returns its message policy.

    While it is held no run of the conversation can start or end (both append an event), so what is read
    about its runs afterwards, in a later statement, stays true until commit.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message_policy FROM runtime_conversation WHERE id = %s FOR NO KEY UPDATE", [conversation_id]
        )
        (policy,) = cursor.fetchone()
    return policy
