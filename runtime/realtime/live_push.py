"""Whether this process's sockets and streams get the live push (the channel layer, in Redis).

While Redis is away each socket and stream of the process fails its reads and joins, tries again every second and
is served from the event log meanwhile. What an operator needs is when that started and when it ended for the
process (docs/edge.md), not a line per socket per second: one condition for the whole process, logged once each
way."""

import logging

from core.outages import Condition

live_push = Condition(
    logging.getLogger(__name__),
    started="live push unavailable (sockets and streams are served from the event log)",
    ended="live push available again",
)
