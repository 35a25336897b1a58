from django.db import connection


def release_connection() -> None:
    """Gives this thread's connection back to the process's pool before it waits (on the provider, a device, a
    pause), so a waiting run holds none; the next statement borrows one again. Inside a transaction, and for a
    process without a pool (whose one connection is kept for its life), it does nothing."""
    if connection.connection is not None and connection.pool is not None and not connection.in_atomic_block:
        connection.close()
