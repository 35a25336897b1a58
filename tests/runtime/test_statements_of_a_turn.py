"""The SQL statements and transactions of a Main Chat turn, end to end, as upper bounds (issue 48, docs/design.md §5):
a first message (the owner's agent and the conversation's session created with it) and a later one.

The message is admitted through the service, as the web process admits it, and its run driven here, in-process, as a
worker's thread drives it, against the Rebyte double over real HTTP. Every statement the turn's threads send is
counted by an execute wrapper (Django's own instrumentation): this thread's (admission, claim, driver) and the
process's group commit's, which writes the reply's windows on a thread and connection of its own
(`CaptureQueriesContext` sees one connection only). A transaction is counted where a statement begins one (psycopg
then sends BEGIN); a statement in autocommit is its own. `python -m bench.statements` lists them from PostgreSQL's log.
"""

import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from django.db import connection
from django.db.backends.signals import connection_created
from psycopg.pq import TransactionStatus

from rebyte.models import RemoteTurn
from runtime.execution.driver import execute_run, worker_identity
from runtime.models import Run, RunState
from runtime.services.admission import MessageCommand
from runtime.services.commands import submit_main_chat_message

# Measured after issue 48's reductions (bench/RESULTS.md "Statements of a turn"): the owner's instructions read with
# the claimed run and under their lock at the turn's start; the claim writing its `run.started` in its statement; the
# binding and its session's message range in one; the run's end settling the reply's message, writing the owner's
# notification and naming the next run in one, its binding written only for a turn id not yet written and its
# reasoning read only when some may have been projected; a first message's Main Chat inserted without a savepoint. A
# change that adds a statement or a transaction to a turn fails here, and the message lists the turn's statements.
# The windows of the reply the group commit writes on its own (their number depends on how the deltas arrive) are
# bounded apart, per window.
FIRST_MESSAGE = {"statements": 32, "transactions": 8}
LATER_MESSAGE = {"statements": 14, "transactions": 4}
STATEMENTS_PER_WINDOW = 4
# At most one window per piece of the reply (two here); usually one, the second piece going with the turn's end.
WINDOWS = 2
GROUP_COMMIT = "group-commit"
# The turn's threads: the test's own (the admission, then the worker's drive) and the group commit's.
TURN_THREADS = {threading.current_thread().name, GROUP_COMMIT}


@dataclass
class Statements:
    """What the turn's threads sent: each statement, and how many transactions they began (the driver's and the
    admission's apart from the group commit's)."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    transactions: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, execute, sql, params, many, context):
        thread = threading.current_thread().name
        if thread in TURN_THREADS:
            raw = context["connection"].connection
            with self._lock:
                self.sent.append((thread, sql))
                # A statement in autocommit is a transaction of its own; one that finds none open begins one.
                if raw.autocommit or raw.info.transaction_status == TransactionStatus.IDLE:
                    self.transactions[thread] = self.transactions.get(thread, 0) + 1
        return execute(sql, params, many, context)

    def count(self, *, group_commit: bool) -> dict:
        threads = {thread for thread in TURN_THREADS if (thread == GROUP_COMMIT) == group_commit}
        return {
            "statements": sum(1 for thread, _ in self.sent if thread in threads),
            "transactions": sum(self.transactions.get(thread, 0) for thread in threads),
        }

    def listing(self) -> str:
        return "\n".join(
            f"{index:3d} {thread[:12]:12} {' '.join(sql.split())[:150]}"
            for index, (thread, sql) in enumerate(self.sent, 1)
        )


@contextmanager
def counted():
    """Counts what the turn's threads send in the block, whichever connection they take; each thread's connection
    object keeps its wrappers across reconnections, so each is taken off at the end."""
    statements = Statements()
    installed = []

    def install(sender, connection, **kwargs):
        if statements not in connection.execute_wrappers:
            connection.execute_wrappers.append(statements)
            installed.append(connection)

    connection.ensure_connection()
    install(None, connection)
    connection_created.connect(install)
    try:
        yield statements
    finally:
        connection_created.disconnect(install)
        for wrapped in installed:
            wrapped.execute_wrappers.remove(statements)


def message_turn(owner, text: str) -> tuple[Run, Statements]:
    """Admits `text` to the owner's Main Chat and drives its run to its end, as a worker would; what both sent."""
    command = MessageCommand(client_message_id=str(uuid.uuid4()), text=text)
    with counted() as admission:
        receipt = submit_main_chat_message(owner=owner, command=command)
    run = Run.objects.get(submission_id=receipt.submission_id)
    with counted() as drive:
        execute_run(run.id, worker_identity())
    drive.sent[:0] = admission.sent
    for thread, began in admission.transactions.items():
        drive.transactions[thread] = drive.transactions.get(thread, 0) + began
    run.refresh_from_db()
    return run, drive


def assert_within(statements: Statements, bounds: dict) -> None:
    measured = statements.count(group_commit=False)
    assert all(measured[name] <= bound for name, bound in bounds.items()), f"{measured}\n{statements.listing()}"
    windows = statements.count(group_commit=True)
    assert windows["transactions"] <= WINDOWS, statements.listing()
    assert windows["statements"] <= STATEMENTS_PER_WINDOW * windows["transactions"], statements.listing()


@pytest.mark.django_db(transaction=True)
def test_a_first_and_a_later_message_stay_within_their_statements_and_transactions(user, rebyte_double):
    # A reply in two pieces: the first goes at once (a window of the group commit), the second with the turn's end.
    rebyte_double.configure(delta_delay_ms=300, delta_chunks=2)

    first_run, first = message_turn(user, "a first message")
    later_run, later = message_turn(user, "a later message")

    for run, text in ((first_run, "a first message"), (later_run, "a later message")):
        assert run.state == RunState.COMPLETED, run.error_message
        assert run.submission.assistant_message.text == f"Echo: {text}"
    state = rebyte_double.state()
    assert (state["counts"]["agents"], state["counts"]["sessions"]) == (1, 1)  # the later turn reused both
    # Each binding keeps its turn's id (the run's end writes it only when no window did).
    turn_ids = {RemoteTurn.objects.get(run=run).turn_id for run in (first_run, later_run)}
    assert len(turn_ids) == 2 and "" not in turn_ids
    assert_within(first, FIRST_MESSAGE)
    assert_within(later, LATER_MESSAGE)
