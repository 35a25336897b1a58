"""`python -m bench.event_table [--replies 300]`: what the event table holds per settled reply once its retention
window is over (heap and indexes, `pg_total_relation_size`), as shipped and as it was before the table dropped its
covered indexes and its copies of what the message and submission rows hold (docs/data-lifecycle.md). Both in the
same run, on the same rows.

Each reply is written through the runtime's own writers, as a worker leaves it: admission (the user message and
`submission.accepted`), `run.started`, 16 `text.delta`, `message.completed` and `run.completed`, the reply's text
appended to its message row; user message and reply are 400 characters each. The pass then compacts them, and the
rows kept are measured in fresh copies of the table with its indexes: as shipped, and as before (the same rows with
the foreign keys' own indexes and what the kept events repeated put back: texts, ids, sequences). Runs in a scratch
database of its own.
"""

import argparse
import uuid

from bench import harness

DELTAS = 16
TEXT = ("A reply long enough to stream in many deltas, as a model's answer does. " * 6)[:400]


def settled_replies(count: int) -> None:
    from django.contrib.auth import get_user_model

    from bench.data_lifecycle import settle_as_a_worker_would
    from runtime.services.admission import MessageCommand
    from runtime.services.commands import submit_main_chat_message

    owners = list(get_user_model().objects.filter(id__in=[i for i, _ in harness.create_users(count, "size")]))
    chunk = TEXT[: len(TEXT) // DELTAS]
    for owner in owners:
        receipt = submit_main_chat_message(
            owner=owner, command=MessageCommand(client_message_id=f"size-{uuid.uuid4()}", text=TEXT)
        )
        settle_as_a_worker_would(receipt.submission_id, chunk, deltas=DELTAS, text_on_the_row=True)


def copy_size(name: str, *, extra_indexes: tuple[str, ...] = (), restored: bool = False) -> tuple[int, int, int]:
    """(rows, heap bytes, index bytes) of a fresh copy of runtime_event's live rows with its indexes (and
    `extra_indexes`, columns indexed alone), what the kept events left out put back if `restored`. A copy, because the
    table's own file still holds what the pass removed until a vacuum reclaims it, and when that can run depends
    on what else the database is doing."""
    from django.db import connection
    from psycopg.types.json import Jsonb

    from runtime.models import Event
    from runtime.wire import events_to_wire

    events = list(Event.objects.order_by("id"))
    payloads = [wire["payload"] for wire in events_to_wire(events)] if restored else [e.payload for e in events]
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {name} (LIKE runtime_event INCLUDING DEFAULTS INCLUDING INDEXES)")
        for column in extra_indexes:
            cursor.execute(f"CREATE INDEX {name}_{column} ON {name} ({column})")
        cursor.executemany(
            f"INSERT INTO {name} (id, conversation_id, seq, type, submission_id, payload, trace_id, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (e.id, e.conversation_id, e.seq, e.type, e.submission_id, Jsonb(payload), e.trace_id, e.created_at)
                for e, payload in zip(events, payloads, strict=True)
            ],
        )
        cursor.execute(f"ANALYZE {name}")
        cursor.execute(f"SELECT (SELECT count(*) FROM {name}), pg_table_size('{name}'), pg_indexes_size('{name}')")
        return cursor.fetchone()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.event_table")
    parser.add_argument("--replies", type=int, default=300)
    args = parser.parse_args()
    database = harness.configure_process_environment()
    harness.create_database(database)
    import django

    django.setup()
    from django.conf import settings

    from runtime.services import retention

    try:
        settled_replies(args.replies)
        settings.IMPO_EVENT_RETENTION_SECONDS = 0
        compacted = retention.prune_events()
        assert compacted.runs == args.replies, compacted
        # The foreign keys' own indexes, dropped by runtime's migration 0018, and the copied texts and ids, back.
        before = copy_size("bench_event_before", extra_indexes=("conversation_id", "submission_id"), restored=True)
        shipped = copy_size("bench_event_shipped")
        for label, (rows, heap, indexes) in (("before", before), ("shipped", shipped)):
            print(
                f"{label}: {rows / args.replies:.1f} events per settled reply;"
                f" {(heap + indexes) / args.replies:,.0f} B of event table per reply"
                f" (heap {heap / args.replies:,.0f}, indexes {indexes / args.replies:,.0f})",
                flush=True,
            )
    finally:
        harness.drop_database(database)


if __name__ == "__main__":
    main()
