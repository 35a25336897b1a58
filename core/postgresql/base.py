"""Django's PostgreSQL backend, with a pool that checks a connection it lends without a round trip.

Django gives its pool psycopg's own check, an empty statement sent on every loan: a run gives its connection back
before each wait and borrows one per window, so a turn paid 4–5 round trips for nothing (docs/operations.md
"Outages"). Django passes that check to the pool itself, so another one needs this subclass.
"""

import select

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

__all__ = ["DatabaseWrapper", "check_lent_connection"]


def check_lent_connection(connection: psycopg.Connection) -> None:
    """Raises for a connection the pool must not lend. An idle connection's socket has nothing to read until the
    server says something: a closed backend (a restart, `pg_terminate_backend`) leaves its last message and the end
    of the stream there. So a silent socket is lent as it is, and only one with something waiting pays psycopg's
    check (which also reads away a harmless notice)."""
    if connection.closed or connection.broken:
        raise psycopg.OperationalError("the pooled connection is closed")
    poller = select.poll()  # not select(): a busy process's descriptors pass 1024
    poller.register(connection.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    if poller.poll(0):
        ConnectionPool.check_connection(connection)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> ConnectionPool | None:
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None
        if self.alias not in self._connection_pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            pool = ConnectionPool(
                # Autocommit as Django's own pool asks; Django sets what a borrower needs on each loan.
                kwargs=self.get_connection_params() | {"autocommit": True},
                open=False,
                configure=self._configure_connection,
                check=check_lent_connection,
                **({} if options is True else options),
            )
            # As Django's: threads racing at startup each build one and the first one kept wins (none is open yet).
            self._connection_pools.setdefault(self.alias, pool)
        return self._connection_pools[self.alias]
