"""The event table keeps no index another one covers (its foreign keys lead the composite ones), and every way the
code reads or deletes events still finds an index to use: each query is EXPLAINed with sequential scans turned off,
so the plan names the index it would take on a table of any size."""

import uuid

import pytest
from django.db import connection, transaction
from django.utils import timezone

from runtime.models import Event, EventType
from runtime.services import retention

pytestmark = pytest.mark.django_db

SOME_ID = uuid.uuid4()


def index_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'runtime_event'")
        return {name for (name,) in cursor.fetchall()}


def plan_of(sql: str, params=()) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(line for (line,) in cursor.fetchall())


def sql_of(queryset) -> tuple[str, tuple]:
    return queryset.query.sql_with_params()


def test_only_the_primary_key_and_the_two_composites_are_left():
    assert index_names() == {"runtime_event_pkey", "runtime_event_seq_unique", "runtime_event_submission"}


@pytest.mark.parametrize(
    ("query", "index"),
    [
        # A socket's catch-up (selectors.events_after), and a conversation's removal (tombstones, cascades).
        (lambda: sql_of(Event.objects.filter(conversation_id=SOME_ID, seq__gt=5).order_by("seq")[:500]), "seq_unique"),
        (lambda: ("DELETE FROM runtime_event WHERE conversation_id = %s", (SOME_ID,)), "seq_unique"),
        # A run's stream (selectors.submission_events_after), its lookups by type, and a submission's cascade.
        (lambda: sql_of(Event.objects.filter(submission_id=SOME_ID, seq__gt=0).order_by("seq")), "submission"),
        (
            lambda: sql_of(Event.objects.filter(submission_id=SOME_ID, type=EventType.RUN_SESSION_REPLACED)),
            "submission",
        ),
        (lambda: ("DELETE FROM runtime_event WHERE submission_id = %s", (SOME_ID,)), "submission"),
    ],
    ids=["catch-up", "conversation-delete", "stream", "by-type", "submission-delete"],
)
def test_every_read_and_delete_uses_an_index(query, index):
    sql, params = query()
    plan = plan_of(sql, params)
    assert f"runtime_event_{index}" in plan, plan


def test_the_retention_pass_finds_a_run_s_events_by_index():
    parameters = retention.compact_parameters(cutoff=timezone.now(), batch=retention.COMPACT_BATCH)
    plan = plan_of(retention._COMPACT_SQL, parameters)
    assert "Seq Scan on runtime_event" not in plan, plan
    assert "runtime_event_submission" in plan, plan
