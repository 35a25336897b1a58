from celery import shared_task

from accounts import deletion_driver
from rebyte.provider import provider_gateway


@shared_task(name="accounts.advance_deletion")
def advance_deletion(owner_id: str) -> None:
    # A wake-up only: the account's deletion row is the queue of record, and the sweeper's pass drives it too.
    deletion_driver.advance_deletion(owner_id, provider_gateway())
