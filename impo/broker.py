"""The Redis broker transport, changed in one place: a worker that loses Redis keeps running.

When the connection to Redis drops, Celery's consumer first detaches the broken connection from its transport and
then closes the task consumer's channel, whose QoS gives back the wake-ups received but not yet acknowledged (with
the threads pool there can always be one between its receipt and its acknowledgement). Giving them back needs
Redis: through the detached transport kombu raises AttributeError, which Celery treats as unrecoverable, and the
worker exits. Here a give-back that cannot reach Redis is skipped: the messages stay in Redis's set of
unacknowledged messages (redelivered after the visibility timeout), and the runs they would wake are re-woken by
the sweeper from the database, which is the queue of record.
"""

import logging

from kombu.transport import redis

logger = logging.getLogger(__name__)


class QoS(redis.QoS):
    def restore_unacked(self, client=None):
        if client is None and self.channel.connection.client is None:
            logger.warning(
                "Redis connection lost: %d unacknowledged message(s) stay in Redis until the visibility timeout",
                len(self._delivered),
            )
            self._delivered.clear()
            return
        super().restore_unacked(client)


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
