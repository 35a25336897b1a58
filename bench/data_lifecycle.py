"""`python -m bench.data_lifecycle [--runs N] [--synthetic M] [--export-messages K]`: what the event log keeps per
settled run inside and after the retention window, how fast the retention pass compacts, and what an export of a
large account costs (docs/data-lifecycle.md).

1. N real replies (the double streaming 16 deltas of a 400-character reply each, a worker process projecting
   them): event rows and bytes per run as they settle (inside the window), then after one pass (after it).
2. M more settled runs written through the real event writer (admission, 16 `text.delta`, `message.completed`,
   `run.completed`) to time the pass at a size where a rate means something: rows removed per second.
3. The export document of an account with K messages: time, bytes, and the peak of Python memory while writing it
   (tracemalloc), which stays at a page's worth whatever K.

Bytes are the rows' own (`pg_column_size`, what the heap holds for them); the table's size on disk is printed too,
but PostgreSQL reuses the space of deleted rows for new ones rather than returning it, so what stays flat under a
steady load is the table, not the file right after one pass. Runs in a scratch database of its own.
"""

import argparse
import asyncio
import os
import time
import tracemalloc
import uuid

from bench import harness

DELTAS = 16
REPLY_TEXT = ("A reply long enough to stream in many deltas, as a model's answer does. " * 6)[:392]


def event_table() -> tuple[int, int, int]:
    """(rows, bytes of the rows, bytes of table + indexes on disk)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(pg_column_size(e.*)), 0), pg_total_relation_size('runtime_event')"
            " FROM runtime_event e"
        )
        return cursor.fetchone()


def real_replies(stack, runs: int) -> None:
    from django.contrib.auth import get_user_model

    from devtools.stack import wait_until
    from runtime.models import TERMINAL_RUN_STATES, Run
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_main_chat_message

    owners = get_user_model().objects.filter(id__in=[i for i, _ in harness.create_users(runs, "retention")])
    # Far enough apart that the worker's coalescing window (100 ms) keeps each delta an event of its own.
    stack.double.configure(delta_delay_ms=300, delta_chunks=DELTAS)
    worker = stack.start_worker("bench-retention-worker")
    try:
        receipts = [
            submit_main_chat_message(
                owner=owner, command=MessageCommand(client_message_id=f"reply-{owner.id}", text=REPLY_TEXT)
            )
            for owner in owners
        ]
        submission_ids = [receipt.submission_id for receipt in receipts]
        run_ids = list(Run.objects.filter(submission_id__in=submission_ids).values_list("id", flat=True))
        wait_until(
            lambda: Run.objects.filter(id__in=run_ids, state__in=TERMINAL_RUN_STATES).count() == runs,
            timeout=120 + runs,
            interval=0.5,
            what=f"{runs} replies to settle",
        )
    finally:
        worker.stop()


def settle_as_a_worker_would(submission_id, chunk: str, *, deltas: int = DELTAS, text_on_the_row: bool = False) -> None:
    """The admitted run's reply written as `deltas` equal deltas of `chunk` through the runtime's event writer (and,
    with `text_on_the_row`, its text appended to the reply's message row), the run left settled; its `run.started`
    and `run.completed` carry what the claim's and the finish's do."""
    from django.db import transaction
    from django.utils import timezone

    from runtime.events import append_events
    from runtime.models import EventType, Run, RunState
    from runtime.services.projection import append_to_messages

    run = Run.objects.select_related("submission").get(submission_id=submission_id)
    message_id, submission_id = str(run.submission.assistant_message_id), str(run.submission_id)
    with transaction.atomic():
        if text_on_the_row:
            append_to_messages({message_id: chunk * deltas})
        append_events(
            run.submission.conversation_id,
            run.submission_id,
            [(EventType.RUN_STARTED, {"submissionId": submission_id, "attempt": 1, "status": RunState.RUNNING})]
            + [(EventType.TEXT_DELTA, {"messageId": message_id, "partId": "p0", "delta": chunk})] * deltas
            + [
                (EventType.MESSAGE_COMPLETED, {"messageId": message_id, "partId": "p0", "text": chunk * deltas}),
                (
                    EventType.RUN_COMPLETED,
                    {"submissionId": submission_id, "status": RunState.COMPLETED, "messageId": message_id},
                ),
            ],
        )
        # Bench bookkeeping: the run marked settled as a worker would leave it.
        Run.objects.filter(id=run.id).update(state=RunState.COMPLETED, finished_at=timezone.now())


def synthetic_settled_runs(count: int) -> None:
    """Settled runs as a worker leaves them, written through the real admission and event writer."""
    from django.contrib.auth import get_user_model

    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_main_chat_message

    owners = list(get_user_model().objects.filter(id__in=[i for i, _ in harness.create_users(count // 20 + 1, "syn")]))
    words = "the quick brown fox jumps over the lazy dog " * 4
    for index in range(count):
        receipt = submit_main_chat_message(
            owner=owners[index % len(owners)],
            command=MessageCommand(client_message_id=f"syn-{index}-{uuid.uuid4()}", text=f"message {index}"),
        )
        settle_as_a_worker_would(receipt.submission_id, words[: len(words) // DELTAS])


def export_of_a_large_account(messages: int) -> None:
    from django.contrib.auth import get_user_model

    from accounts.selectors import document
    from devtools.stack import long_task_conversation

    [(owner_id, _)] = harness.create_users(1, "exported")
    owner = get_user_model().objects.get(id=owner_id)
    long_task_conversation(owner, messages, REPLY_TEXT)

    async def write() -> int:
        size = 0
        async for piece in document(owner):
            size += len(piece.encode())
        return size

    started = time.perf_counter()
    size = asyncio.run(write())
    elapsed = time.perf_counter() - started
    # Again under tracemalloc, which slows Python down: the peak only, not the time.
    tracemalloc.start()
    asyncio.run(write())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"export: {messages:,} messages, {size / 1e6:.1f} MB in {elapsed:.2f} s; peak Python memory {peak / 1e6:.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100, help="real replies")
    parser.add_argument("--synthetic", type=int, default=2000, help="settled runs written directly, to time the pass")
    parser.add_argument("--export-messages", type=int, default=10_000, help="messages of the exported account")
    args = parser.parse_args()
    database = harness.configure_process_environment()
    harness.create_database(database)
    import django

    django.setup()
    from django.conf import settings

    from devtools.stack import RebyteDouble, Stack
    from runtime.services import retention

    double = RebyteDouble()
    stack = Stack(database_name=database, double=double, redis_url=os.environ["REDIS_URL"])
    try:
        real_replies(stack, args.runs)
        rows, row_bytes, disk = event_table()
        print(f"inside the window: {rows / args.runs:.1f} rows, {row_bytes / args.runs:,.0f} B of rows per run")
        settings.IMPO_EVENT_RETENTION_SECONDS = 0
        retention.prune_events()
        rows, row_bytes, _ = event_table()
        print(f"after the window:  {rows / args.runs:.1f} rows, {row_bytes / args.runs:,.0f} B of rows per run")
        print(f"  (table + indexes on disk: {disk / args.runs:,.0f} B per run before the pass)")

        settings.IMPO_EVENT_RETENTION_SECONDS = 3600.0
        synthetic_settled_runs(args.synthetic)
        settings.IMPO_EVENT_RETENTION_SECONDS = 0
        before, _, _ = event_table()
        started = time.perf_counter()
        compacted = retention.prune_events()
        elapsed = time.perf_counter() - started
        after, _, _ = event_table()
        print(
            f"pruning: {compacted.runs} runs, {compacted.events} rows in {elapsed:.2f} s ="
            f" {compacted.events / elapsed:,.0f} rows/s, {compacted.runs / elapsed:,.0f} runs/s"
            f" (table {before} -> {after} rows)"
        )
        export_of_a_large_account(args.export_messages)
    finally:
        stack.stop()
        double.stop()
        harness.drop_database(database)


if __name__ == "__main__":
    main()
