"""The project's settings, plus a count of the SQL statements the process sends, for bench/many_hosts.py.

PostgreSQL's own count (pg_stat_statements) needs the module preloaded at the server's start, which a shared
server cannot be asked for; so each worker host started with `DJANGO_SETTINGS_MODULE=bench.counted_settings`
counts what its connections execute and adds the count to a Redis key every STATEMENTS_FLUSH_SECONDS. The count is
Django's execute wrappers' (every statement a connection sends, including the group commit's and the claims'
prepared ones), so it costs the worker a little CPU and PostgreSQL none.
"""

import os
import threading

from impo.settings import *  # noqa: F403
from impo.settings import REDIS_URL

STATEMENTS_KEY = "impo:bench:statements"
STATEMENTS_FLUSH_SECONDS = 0.5


class _StatementCount:
    def __init__(self):
        self._lock = threading.Lock()
        self._unsent = 0
        self._flusher: threading.Thread | None = None
        self._pid = 0

    def install(self, sender=None, connection=None, **kwargs):
        if self.count not in connection.execute_wrappers:
            connection.execute_wrappers.append(self.count)

    def count(self, execute, sql, params, many, context):
        with self._lock:
            self._unsent += 1
            if self._pid != os.getpid():  # a forked child flushes its own count
                self._pid = os.getpid()
                self._flusher = threading.Thread(target=self._flush_forever, name="bench-statements", daemon=True)
                self._flusher.start()
        return execute(sql, params, many, context)

    def _flush_forever(self):
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        stop = threading.Event()
        while not stop.wait(STATEMENTS_FLUSH_SECONDS):
            with self._lock:
                unsent, self._unsent = self._unsent, 0
            if unsent:
                client.incrby(STATEMENTS_KEY, unsent)


def _install_counter() -> None:
    from django.db.backends.signals import connection_created

    connection_created.connect(_StatementCount().install, weak=False)


_install_counter()
