"""Actions started together, for tests of what the database decides when requests race."""

import threading
from collections.abc import Callable

import psycopg
from django.db import connection


def all_at_once(count: int, act: Callable[[int], object]) -> list:
    """Runs `act(0)`, …, `act(count - 1)` in threads released together; their results, in index order."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = act(index)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def database_parameters() -> dict:
    """The test database's connection parameters, for a connection of a test's own (psycopg) beside Django's."""
    settings = connection.settings_dict
    return {
        "dbname": settings["NAME"],
        "user": settings["USER"],
        "password": settings["PASSWORD"],
        "host": settings["HOST"],
        "port": settings["PORT"] or 5432,
    }


def waiting_for_a_lock(statement: str) -> bool:
    """Whether a statement of the test database matching `statement` (an ILIKE pattern) waits for a lock. Asked on
    a connection of its own: a transaction sees one snapshot of the activity it reads."""
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE %s"
    )
    with psycopg.connect(**database_parameters(), autocommit=True) as observer:
        return observer.execute(query, [statement]).fetchone()[0] > 0
