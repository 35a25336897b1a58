"""The SQL statements of one first and two later Main Chat messages, end to end, listed: `python -m bench.statements`.

The admission runs here (through the service, as a web process runs it, on a connection of its own), the run in a
worker host as `make run` starts it, against the Rebyte double. PostgreSQL itself is asked to log every statement of
the scratch database (`ALTER DATABASE … SET log_statement = 'all'`), and its log is read back: so every process's
statements are seen, the prepared ones included, and nothing of ours counts them. The statements this process sends
to wait for the run to settle are left out (by their backend's pid).

Needs the server's log file readable (`IMPO_BENCH_POSTGRES_LOG`, Debian's path by default) and a superuser; the
figures go to bench/RESULTS.md ("Statements of a turn").
"""

import os
import re
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from bench import harness

POSTGRES_LOG = Path(os.environ.get("IMPO_BENCH_POSTGRES_LOG", "/var/log/postgresql/postgresql-15-main.log"))
# "2026-12-06 21:26:06.880 UTC [1234] postgres@impo_bench_1 LOG:  statement: SELECT …" (Debian's log_line_prefix)
LOG_LINE = re.compile(
    r"^\S+ \S+ \S+ \[(?P<pid>\d+)\] \S+@(?P<database>\S+) LOG:  (?:statement|execute [^:]*): (?P<sql>.*)$"
)
LABELS = ("first message", "later message", "later message again")


def _psql(sql: str) -> None:
    subprocess.run(["psql", "-h", harness.PGHOST, "-p", harness.PGPORT, "-U", harness.PGUSER, "-qc", sql], check=True)


def _backend_pid() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _admit(owner, text: str) -> str:
    """One message, admitted on a connection of its own (a thread), as a web process would."""
    from django.db import connection

    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_main_chat_message

    admitted = {}

    def admit():
        try:
            command = MessageCommand(client_message_id=str(uuid.uuid4()), text=text)
            admitted["submission"] = submit_main_chat_message(owner=owner, command=command).submission_id
        finally:
            connection.close()

    thread = threading.Thread(target=admit)
    thread.start()
    thread.join()
    return admitted["submission"]


def statements_of(database: str, since: int, excluded_pids: set[int]) -> list[str]:
    """The statements the log holds from `since` on, of `database`, but the excluded backends'. A statement written
    over several lines continues on lines of its own, each begun with a tab."""
    with POSTGRES_LOG.open(errors="replace") as log:
        log.seek(since)
        lines = log.read().splitlines()
    found, taking = [], False
    for line in lines:
        if line.startswith("\t"):
            if taking:
                found[-1] = f"{found[-1]} {line.strip()}".strip()
            continue
        match = LOG_LINE.match(line)
        taking = bool(match and match["database"] == database and int(match["pid"]) not in excluded_pids)
        if taking:
            found.append(match["sql"].strip())
    return found


def shape(sql: str) -> str:
    """A statement without its values: what it does, to group the listing."""
    sql = re.sub(r"'[^']*'(::\w+)?", "?", sql)
    sql = re.sub(r"\b\d+\b", "?", sql)
    sql = re.sub(r'"\w+"\."(\w+)"', r"\1", sql)
    sql = re.sub(r"\$\d+|\s+", lambda m: "?" if m[0].startswith("$") else " ", sql)
    return sql[:150] or "(an empty statement: the connection pool's check of a connection)"


def main() -> None:
    database = harness.configure_process_environment()
    harness.create_database(database)
    _psql(f"ALTER DATABASE {database} SET log_statement = 'all'")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from bench.inflight_load import wait_settled
    from devtools.stack import RebyteDouble, Stack
    from runtime.models import Run

    double = RebyteDouble()
    stack = Stack(database_name=database, double=double, redis_url=os.environ["REDIS_URL"])
    try:
        stack.start_worker(host_processes=1)
        owner = get_user_model().objects.create(username="statements", password="!")
        for label in LABELS:
            waiting_pid = _backend_pid()
            since = POSTGRES_LOG.stat().st_size
            submission = _admit(owner, f"hello, {label}")
            wait_settled([str(Run.objects.get(submission_id=submission).id)], timeout=120)
            time.sleep(2)  # the worker's last statements (its commit after the run's end) reach the log
            found = statements_of(database, since, {waiting_pid})
            commits = sum(1 for sql in found if sql.upper() == "COMMIT")
            print(f"\n## {label}: {len(found)} statements, {commits} transactions committed", flush=True)
            for sql, count in Counter(shape(sql) for sql in found).most_common():
                print(f"{count:3d}  {sql}")
            connection.close()
    finally:
        stack.stop()
        double.stop()
        _psql(f"ALTER DATABASE {database} RESET log_statement")
        harness.drop_database(database)


if __name__ == "__main__":
    main()
