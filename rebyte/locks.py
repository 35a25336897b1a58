"""Every lock rebyte takes: an owner's agent creation (an advisory lock, there being no row to lock before the
intent exists), an owner's instructions (an advisory lock, their row being absent until first written) and a creation
intent's row. None is held across a request to the provider. The global order, with every app's rows, is in
docs/locking.md: the agent-creation lock, runs, the instructions lock, then a creation intent.
"""

from django.db import connection

from rebyte.models import CreationIntent


def lock_agent_creation(owner_id) -> None:
    """Until the transaction ends, only this one may open the owner's agent create (a transaction-scoped advisory
    lock on the owner's id, which serialises the check for one in flight with the insert of a new one)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"impo-agent-create:{owner_id}"])


def lock_intent(intent_id) -> CreationIntent:
    """The intent, waiting for its holder (FOR NO KEY UPDATE: it is adopted in place, and the agent or session
    inserted with its adoption references it)."""
    return CreationIntent.objects.select_for_update(no_key=True).get(id=intent_id)


def lock_owner_instructions(owner_id) -> None:
    """Until the transaction ends, no run of the owner may start its turn, nor another change of the owner's
    instructions commit (the exclusive side of `share_owner_instructions`)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [_instructions_key(owner_id)])


def share_owner_instructions(owner_id) -> None:
    """Until the transaction ends, the owner's instructions stay as read: a change waits, or committed before (a
    run's turn starting; runs of one owner do not wait for each other)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))", [_instructions_key(owner_id)])


def _instructions_key(owner_id) -> str:
    return f"impo-instructions:{owner_id}"
