"""Drives an acknowledged account deletion to its end (docs/data-lifecycle.md "Deleting"), woken by this app's
task after the acknowledgement (`accounts.services.delete_account`) and by the sweeper's pass over the
`AccountDeletion` rows, the queue of record: a lost wake-up or a killed worker only delays it. Every step reads its
state from the database, so a wake-up and the sweeper driving one account at once do no step twice.
"""

from django.contrib.auth import get_user_model
from django.db import transaction

from attachments import selectors as attachment_selectors
from attachments import services as attachment_services
from core.loops import advance_each
from rebyte.client import RebyteGateway
from runtime.execution import remote_deletes
from runtime.services import tombstones
from scheduling import selectors as scheduling_selectors

# Accounts the sweeper advances per pass (each costs a few queries, plus its provider calls when due).
DELETIONS_PER_SWEEP = 20


def advance_deletion(owner_id, gateway: RebyteGateway) -> bool:
    """One step of an acknowledged account deletion: the runtime's part (conversations purged, then the agents
    deleted at the provider) first; once nothing of the account is left there and every schedule's workflow has
    stopped, the user and all its rows are deleted. True once the user is gone. The owner's files go between the
    two: their rows would go with the user, and an object left without its row would never be found again, so a
    store that is down holds the user back until its objects are gone."""
    if not remote_deletes.advance_account_remote(owner_id, gateway):
        return False
    if not attachment_services.delete_files_of(owner_id):
        return False
    with transaction.atomic(durable=True):
        if not scheduling_selectors.plans_stopped(owner_id) or attachment_selectors.files_remain(owner_id):
            return False
        get_user_model().objects.filter(pk=owner_id).delete()
    return True


def advance_deletions(gateway: RebyteGateway) -> int:
    """The sweeper's pass over the accounts being deleted, oldest first; returns how many were finished. A failure
    of one (the database, a bug) is logged and the others go on."""
    owner_ids = tombstones.accounts_to_delete(DELETIONS_PER_SWEEP)
    return advance_each(owner_ids, lambda owner_id: advance_deletion(owner_id, gateway), what="deletion of account")
