"""The push sender: runtime's notifications made into deliveries, and due deliveries sent, a few at once.

Runs in the webhooks loop's process (`manage.py run_webhooks`, a thread beside the webhook collection), so the
stack's Procfile runs it with no process of its own. The tables are the queue: a sender that dies leaves claimed
deliveries that fall due again when their claim's deadline passes, and notifications not yet dispatched stay
where they are. Redis is not needed to send (only to know whether a page is in view).
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from django.conf import settings
from django.db import close_old_connections, connection

from core import doorbells
from runtime.outbound import PUSH_DOORBELL
from webhooks import push, push_services
from webhooks.clients import HostClients

logger = logging.getLogger(__name__)


@contextmanager
def _sender():
    """The sender's threads and its HTTP clients, for as long as it runs."""
    clients = push.new_clients()
    try:
        with ThreadPoolExecutor(max_workers=settings.IMPO_PUSH_SENDERS, thread_name_prefix="push-sender") as executor:
            yield executor, clients
    finally:
        clients.close()


def one_pass(executor: ThreadPoolExecutor, clients: HostClients) -> tuple[int, int]:
    """Dispatches every notification waiting, then sends the deliveries due; returns (notifications, attempts)."""
    dispatched = 0
    while True:  # a backlog (the loop was down) is drained now, a batch per transaction
        batch = push_services.dispatch_notifications()
        dispatched += batch
        if batch < push_services.DISPATCH_BATCH:
            break
    attempts = push_services.claim_attempts()
    outcomes = [outcome for outcome in executor.map(lambda attempt: _send(attempt, clients), attempts) if outcome]
    push_services.record_outcomes(outcomes)
    return dispatched, len(attempts)


def _send(attempt: push_services.PushAttempt, clients: HostClients) -> push_services.PushOutcome | None:
    try:
        return push.send(attempt, clients)
    except Exception:
        logger.exception("push %s: the attempt failed; it is due again after its claim's deadline", attempt.delivery_id)
        connection.close()
        return None


def run_forever(interval: float, stop: threading.Event) -> None:
    with _sender() as (executor, clients):
        while not stop.is_set():
            try:
                dispatched, attempted = one_pass(executor, clients)
            except Exception:
                # Like the webhooks pass: an outage of the database is logged and waited out.
                logger.exception("push pass failed; trying again in %.1f s", interval)
                connection.close()
                dispatched = attempted = 0
            if dispatched or attempted:
                logger.info("push: %d notifications dispatched; %d attempts made", dispatched, attempted)
                if attempted >= push_services.SEND_BATCH:
                    continue  # more may be due now (a backlog): no wait
            # Rung after a notification's commit (runtime.services.lifecycle); the poll is the safety net.
            doorbells.wait(PUSH_DOORBELL, interval, stop)
            close_old_connections()


def start(interval: float) -> threading.Event:
    """Starts the sender on a daemon thread; the event returned stops it."""
    stop = threading.Event()
    threading.Thread(target=run_forever, args=(interval, stop), name="push-loop", daemon=True).start()
    return stop


def pass_once() -> None:
    with _sender() as (executor, clients):
        one_pass(executor, clients)
