"""Deleting an account, composed here above the apps (docs/data-lifecycle.md "Deleting"): each app deletes its own
part in one transaction, the provider's part is driven by the runtime's deletion step, and the user goes last.

`DELETE /api/v1/account` with `{"password"}` (a token alone does not delete an account). In the acknowledging
transaction, under the owner's row lock: the user is deactivated (no session or token authenticates it from the
commit on), its API tokens, webhook endpoints and push subscriptions are deleted, its schedules tombstoned (their
workflows told after commit), and every conversation deleted as a Task's is, the account's deletion queued. Once
nothing of it is left at the provider (conversations purged, agents deleted) and every schedule's workflow has
acknowledged its deletion, the user is deleted, and every row of it with it (`accounts.deletion_driver`, which knows the
provider; this module stays light for the web process).
"""

from django.db import transaction
from rest_framework.authtoken.models import Token

from core.error_codes import ErrorCode
from core.errors import ApplicationError
from core.login import confirm_password
from runtime import locks as runtime_locks
from runtime import outbound
from runtime.services import tombstones
from scheduling import services as scheduling_services
from webhooks import push_services
from webhooks import services as webhook_services

# This app's own task (accounts/tasks.py), which wakes `accounts.deletion_driver.advance_deletion`; the sweeper's
# pass is the queue of record, so a wake-up that never left is found there (nothing to mark).
ADVANCE_DELETION_TASK = "accounts.advance_deletion"


class PasswordIncorrect(ApplicationError):
    code = ErrorCode.PASSWORD_INCORRECT


def check_password(*, user, password: str, address: str) -> None:
    """The password checked before its owner is asked "for good?" (the account page): a wrong one is said first, not
    after a confirmation. It counts with the login form's failures like the deletion's own check."""
    if not confirm_password(user, password, address):
        raise PasswordIncorrect("The password is not this account's.")


def delete_account(*, user, password: str, address: str) -> None:
    """The owner's deletion of their account, confirmed by their password; acknowledged in one transaction."""
    if not confirm_password(user, password, address):
        raise PasswordIncorrect("The password is not this account's; nothing was deleted.")
    # Locks in the global order (docs/locking.md): the owner, plans, runs and conversations, endpoints, subscriptions.
    with transaction.atomic(durable=True):
        runtime_locks.lock_owner(user)
        user.is_active = False
        user.save(update_fields=["is_active"])
        Token.objects.filter(user=user).delete()
        scheduling_services.delete_plans_of(user)
        tombstones.tombstone_account_conversations(user)
        webhook_services.delete_endpoints_of(user)
        push_services.delete_subscriptions_of(user)
        outbound.send_task_after_commit(ADVANCE_DELETION_TASK, user.pk, mark_unsent=lambda: None)
