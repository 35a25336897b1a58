"""Actions started together, for tests of what the database decides when requests race."""

import threading
from collections.abc import Callable

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
