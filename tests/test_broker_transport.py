"""The broker transport every Celery client uses (impo/broker.py), against the real Redis."""

import uuid

import pytest
import redis
from django.conf import settings
from kombu import Connection

from tests.faults.instances import PrivateRedis


def test_a_channel_closed_after_its_connection_was_dropped_keeps_its_unacknowledged_message_in_redis():
    queue = f"broker-test-{uuid.uuid4().hex}"
    with Connection(settings.CELERY_BROKER_URL, transport=settings.CELERY_BROKER_TRANSPORT) as sending:
        sending.SimpleQueue(queue).put({"wake": "a run"})
    connection = Connection(settings.CELERY_BROKER_URL, transport=settings.CELERY_BROKER_TRANSPORT)
    channel = connection.channel()
    message = connection.SimpleQueue(queue, channel=channel).get(timeout=10)  # received, not acknowledged

    # Where Celery's consumer is when the connection to Redis breaks: the broken connection was dropped from the
    # transport (kombu's `Connection` sets this to None) and the channel holding the message is closed next. With
    # kombu's own transport the close raised AttributeError, and the worker exited on an "unrecoverable error".
    connection.transport.client = None
    channel.close()
    message.ack()  # the wake-up's task ran meanwhile: acknowledged through the closed channel

    unacknowledged = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        assert unacknowledged.hexists("unacked", message.delivery_tag)  # redelivered after the visibility timeout
        assert unacknowledged.llen(queue) == 0  # not given back at once: the sweeper re-wakes its run meanwhile
    finally:
        unacknowledged.hdel("unacked", message.delivery_tag)
        unacknowledged.close()


@pytest.mark.processes
def test_an_acknowledgement_redis_does_not_answer_is_one_warning_and_leaves_the_message_unacknowledged(caplog):
    redis_server = PrivateRedis()
    queue = f"broker-test-{uuid.uuid4().hex}"
    try:
        with Connection(redis_server.url, transport=settings.CELERY_BROKER_TRANSPORT) as sending:
            sending.SimpleQueue(queue).put({"wake": "a run"})
        connection = Connection(redis_server.url, transport=settings.CELERY_BROKER_TRANSPORT)
        message = connection.SimpleQueue(queue, channel=connection.channel()).get(timeout=10)
    finally:
        # Redis goes away while the wake-up's task runs, and the task ends before the consumer notices: its
        # acknowledgement finds no server. kombu raised, and Celery logged a critical traceback for it.
        redis_server.stop()

    message.ack()

    [warning] = [record for record in caplog.records if record.name == "impo.broker"]
    assert f"message {message.delivery_tag} stays unacknowledged until the visibility timeout" in warning.getMessage()
    assert warning.exc_info is None
