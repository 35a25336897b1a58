from celery import shared_task

from webhooks import delivery


@shared_task(name="webhooks.deliver")
def deliver_webhook(delivery_id: str) -> None:
    # A wake-up only: the claim in the database decides whether this worker sends, and when.
    delivery.deliver(delivery_id)
