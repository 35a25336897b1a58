"""A pooled connection is checked as it is lent without a round trip while it is healthy, and one the server closed
is replaced rather than lent (core/postgresql/base.py)."""

import pytest
from django.db import connection

from core.postgresql.base import DatabaseWrapper
from devtools.stack import wait_until


@pytest.fixture
def pooled():
    settings = {
        **connection.settings_dict,
        "CONN_MAX_AGE": 0,
        "OPTIONS": {**connection.settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 1}},
    }
    wrapper = DatabaseWrapper(settings, alias="pooled_connections_test")
    yield wrapper
    wrapper.close()
    wrapper.close_pool()


def backend_of(wrapper: DatabaseWrapper, marker: str) -> int:
    """Borrows the pool's one connection, runs a statement the server will show, and gives the connection back."""
    with wrapper.cursor() as cursor:
        cursor.execute(f"SELECT pg_backend_pid() /* {marker} */")
        pid = cursor.fetchone()[0]
    wrapper.close()
    return pid


def last_statement_of(pid: int) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.mark.django_db(transaction=True)
def test_a_healthy_connection_is_lent_without_a_statement(pooled):
    pid = backend_of(pooled, "first loan")

    pooled.ensure_connection()  # the loan, checked

    assert pooled.connection.info.backend_pid == pid
    assert "first loan" in last_statement_of(pid)  # psycopg's own check would have sent "" here


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_closed_is_replaced_before_it_is_lent(pooled):
    pid = backend_of(pooled, "before the termination")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_until(lambda: last_statement_of(pid) is None, timeout=60, what="the terminated backend to end")

    replacement = backend_of(pooled, "after the termination")

    assert replacement != pid
