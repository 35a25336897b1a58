from celery import shared_task

from impo import accounts


@shared_task(name="impo.finish_account_deletion")
def finish_account_deletion(owner_id: str) -> None:
    # A wake-up only: the runtime's deletion pass sends it again while the account's deletion row remains.
    accounts.finish_account_deletion(owner_id)
