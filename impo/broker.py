"""The Redis broker transport, changed in one place: a worker that loses Redis keeps running.

When the connection to Redis drops, Celery's consumer first detaches the broken connection from its transport and
then closes the task consumer's channel, whose QoS gives back the wake-ups received but not yet acknowledged (with
the threads pool there can always be one between its receipt and its acknowledgement); a wake-up already running
is acknowledged later, through that closed channel. Both need Redis: through the detached transport (or the closed
channel) kombu raises AttributeError, which Celery treats as unrecoverable, and the worker exits. Here a give-back
or an acknowledgement that has no connection left is skipped: the message stays in Redis's set of unacknowledged
messages (redelivered after the visibility timeout: a wake-up whose claim then finds nothing to do), and the runs
they would wake are re-woken by the sweeper from the database, which is the queue of record.
"""

import logging

from kombu.transport import redis

logger = logging.getLogger(__name__)


class QoS(redis.QoS):
    def _connection_dropped(self) -> bool:
        transport = self.channel.connection
        return transport is None or transport.client is None

    def restore_unacked(self, client=None):
        if client is None and self._connection_dropped():
            logger.warning(
                "Redis connection lost: %d unacknowledged message(s) stay in Redis until the visibility timeout",
                len(self._delivered),
            )
            self._delivered.clear()
            return
        super().restore_unacked(client)

    def ack(self, delivery_tag):
        if not self._kept_in_redis(delivery_tag):
            self._unless_redis_is_down(super().ack, delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if not self._kept_in_redis(delivery_tag):
            self._unless_redis_is_down(super().reject, delivery_tag, requeue=requeue)

    def _unless_redis_is_down(self, settle, delivery_tag, **options) -> None:
        """An acknowledgement (or rejection) sent while Redis is down but before the consumer noticed: it fails like
        one skipped above, and is told in one line, not as kombu's critical traceback (an outage is not a bug)."""
        try:
            settle(delivery_tag, **options)
        except self.channel.connection_errors as exc:
            logger.warning(
                "Redis unavailable (%s): message %s stays unacknowledged until the visibility timeout",
                exc,
                delivery_tag,
            )
            self._delivered.pop(delivery_tag, None)

    def _kept_in_redis(self, delivery_tag) -> bool:
        """True when the message's channel has no connection left: its acknowledgement (or rejection) is skipped."""
        if not self._connection_dropped():
            return False
        logger.warning(
            "Redis connection lost: message %s stays unacknowledged until the visibility timeout", delivery_tag
        )
        self._delivered.pop(delivery_tag, None)
        return True


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
