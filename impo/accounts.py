"""Deleting an account, composed here above the apps (docs/data-lifecycle.md "Deleting"): each app deletes its own
part in one transaction, the provider's part is driven by the runtime's deletion pass, and the user goes last.

`DELETE /api/v1/account` with `{"password"}` (a token alone does not delete an account). In the acknowledging
transaction, under the owner's row lock: the user is deactivated (no session or token authenticates it from the
commit on), its API tokens, webhook endpoints and push subscriptions are deleted, its schedules tombstoned (their
workflows told after commit), and every conversation deleted as a Task's is, the account's deletion queued. Once
nothing of it is left at the provider (conversations purged, agents deleted), the runtime wakes the last step here:
when every schedule's workflow has acknowledged its deletion, the user is deleted, and every row of it with it.
"""

from django.contrib.auth import get_user_model
from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.response import Response

from impo.core.error_codes import ErrorCode
from impo.core.errors import ApplicationError
from impo.core.login import confirm_password
from impo.core.openapi import WRITE_ERRORS, responses
from impo.core.serializers import StrictSerializer, validated
from impo.core.views import IcaAPIView
from runtime import locks as runtime_locks
from runtime.models import AccountDeletion
from runtime.services import deletion
from scheduling import selectors as scheduling_selectors
from scheduling import services as scheduling_services
from webhooks import push_services
from webhooks import services as webhook_services


class PasswordIncorrect(ApplicationError):
    code = ErrorCode.PASSWORD_INCORRECT


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
        deletion.delete_account_conversations(user)
        webhook_services.delete_endpoints_of(user)
        push_services.delete_subscriptions_of(user)


def finish_account_deletion(owner_id) -> bool:
    """The account's last step, once the runtime found nothing of it left at the provider: the user and all its
    rows are deleted when every schedule's workflow has stopped (else a later wake-up tries again)."""
    with transaction.atomic(durable=True):
        ready = AccountDeletion.objects.filter(owner_id=owner_id, remote_done_at__isnull=False).exists()
        if not ready or not scheduling_selectors.plans_stopped(owner_id):
            return False
        get_user_model().objects.filter(pk=owner_id).delete()
    return True


class AccountDeleteSerializer(StrictSerializer):
    password = serializers.CharField(trim_whitespace=False, max_length=4096, help_text="The account's password.")


class AccountDeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField(
        help_text="Always true: the account can no longer sign in; its data goes in the background."
    )


class AccountView(IcaAPIView):
    @extend_schema(
        request=AccountDeleteSerializer,
        responses=responses({202: AccountDeletedSerializer}, ErrorCode.PASSWORD_INCORRECT, 429, *WRITE_ERRORS),
        description="Deletes the account, confirmed with its password (a token alone cannot): from the answer on no"
        " session or token signs in as it; every conversation (and its sessions at the agent provider), the agent,"
        " tokens, webhooks, push subscriptions and schedules go in the background. Wrong passwords count with the"
        " login form's failures.",
    )
    def delete(self, request):
        password = validated(AccountDeleteSerializer, request.data).validated_data["password"]
        delete_account(user=request.user, password=password, address=request.META.get("REMOTE_ADDR", ""))
        return Response({"deleted": True}, status=202)
