"""Row, table and advisory locks are taken in each app's lock module only (`<app>/locks.py`, in the order
docs/locking.md gives) or in a place listed with its reason (`tests/lock_sites.py`): a lock taken anywhere else,
outside tests and migrations, fails here, whether through the ORM or written in SQL. Reads source text; no
database."""

from pathlib import Path

import pytest

from tests.lock_sites import LISTED, lock_sites

ROOT = Path(__file__).resolve().parent.parent


def test_no_lock_is_taken_outside_the_lock_modules_and_the_listed_places():
    assert [str(site) for site in lock_sites(ROOT) if site.place not in LISTED] == []


def test_every_listed_place_still_takes_or_reads_a_lock():
    assert {site.place for site in lock_sites(ROOT)} >= set(LISTED)


def test_a_lock_taken_in_a_services_module_is_found(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "locks.py").write_text("Order.objects.select_for_update(no_key=True)\n")
    (tmp_path / "shop" / "services.py").write_text(
        "x = 1\nOrder.objects.select_for_update().get(id=1)\ncursor.execute('SELECT pg_advisory_xact_lock(1)')\n"
    )
    assert [str(site) for site in lock_sites(tmp_path)] == ["shop/services.py:2", "shop/services.py:3"]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id FROM shop_order WHERE id = %s FOR UPDATE",
        "SELECT id FROM shop_order WHERE id = %s FOR NO KEY UPDATE SKIP LOCKED",
        "SELECT id FROM shop_order WHERE id = %s FOR SHARE",
        "SELECT id FROM shop_order WHERE id = %s FOR KEY SHARE",
        "select id from shop_order where id = %s for\n    no key update of shop_order",
        "LOCK TABLE shop_order IN EXCLUSIVE MODE",
        "SELECT pg_advisory_lock(%s)",
        "SELECT pg_advisory_xact_lock(%s)",
        "SELECT pg_try_advisory_lock(%s)",
        "SELECT pg_try_advisory_xact_lock_shared(%s)",
    ],
)
def test_a_lock_written_in_sql_outside_a_lock_module_is_found(tmp_path, sql):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "selectors.py").write_text(
        f'def read(cursor):\n    """Reads the order FOR SHARE (prose, not a lock)."""\n    # FOR UPDATE in a comment\n'
        f"    cursor.execute(\n        {sql!r}\n    )\n"
    )
    [site] = lock_sites(tmp_path)
    assert (str(site), site.place) == ("shop/selectors.py:5", "shop/selectors.py::read")


def test_a_lock_built_from_pieces_of_sql_is_found(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "services.py").write_text(
        'ORDER_SQL = "SELECT id FROM shop_order"\n\n\ndef lock(cursor, table):\n'
        '    cursor.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE")\n'
    )
    assert [str(site) for site in lock_sites(tmp_path)] == ["shop/services.py:5"]
