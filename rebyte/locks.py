"""Every lock rebyte takes: an owner's agent creation (an advisory lock, there being no row to lock before the
intent exists) and a creation intent's row. Neither is held across a request to the provider. The global order,
with every app's rows, is in docs/locking.md: the agent-creation lock, then a creation intent.
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
