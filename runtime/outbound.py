"""The one way anything leaves the database: after the transaction that justified it commits.

On-commit callbacks die with the process, so every message sent from here is a hint that a
periodic job can reproduce from the database (the sweeper re-wakes runs; websocket subscribers
re-read the event log when they see a gap in `seq`).
"""

from collections.abc import Callable

from django.db import transaction


def send_after_commit(send: Callable[[], None]) -> None:
    # robust: a broker or Redis outage is logged, never raised into a request whose work is
    # already committed; the sweeper or a reader's gap check recovers the lost hint.
    transaction.on_commit(send, robust=True)


def wake_run(run_id) -> None:
    from runtime.tasks import execute_run  # tasks import the services that call this module

    send_after_commit(lambda: execute_run.delay(str(run_id)))


def publish_events(conversation_id, wire_events: list[dict]) -> None:
    if not wire_events:
        return

    def push():
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        group = conversation_group(conversation_id)
        for wire_event in wire_events:
            async_to_sync(layer.group_send)(group, {"type": "conversation.event", "event": wire_event})

    send_after_commit(push)


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"
