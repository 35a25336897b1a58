"""docs/locking.md is the map of every lock: each function (and shared locking statement) of every lock module and
each place the lock guard lists is named in it, and its global order places every kind of row a lock module locks
(by model name), the advisory lock too. Reads source text and the models' tables; no database."""

import re
from pathlib import Path

from django.apps import apps
from django.contrib.auth import get_user_model

from tests.lock_sites import LISTED, lock_modules, locked_kinds, named_locks

ROOT = Path(__file__).resolve().parent.parent
LOCKING = (ROOT / "docs" / "locking.md").read_text(encoding="utf-8")
GLOBAL_ORDER = LOCKING.split("## The global order", 1)[1].split("\n## ", 1)[0]


def _named(name: str, text: str) -> bool:
    return re.search(rf"`(?:[\w.]+\.)?{re.escape(name)}[`(]", text) is not None


def _model_names(kinds: set[str]) -> set[str]:
    """Each kind as the model it is: a table by the model that owns it, the user model by its name."""
    tables = {model._meta.db_table: model.__name__ for model in apps.get_models()}
    names = set()
    for kind in kinds:
        if kind == "get_user_model":
            names.add(get_user_model().__name__)
        elif kind == "advisory" or kind in tables.values():
            names.add(kind)
        elif kind in tables:
            names.add(tables[kind])
        # Anything else a locking statement reads FROM is a common table expression of its own, not a table.
    return names


def test_every_lock_function_and_listed_place_is_named_in_docs_locking():
    names = [name for path in lock_modules(ROOT) for name in named_locks(path)]
    names += [place.rsplit(".", 1)[-1].rsplit("::", 1)[-1] for place in LISTED]
    assert [name for name in names if not _named(name, LOCKING)] == []


def test_the_global_order_places_every_kind_of_row_a_lock_module_locks():
    kinds = _model_names(set().union(*(locked_kinds(path) for path in lock_modules(ROOT))))
    assert "advisory" in kinds and "Run" in kinds  # the reader sees both forms
    unplaced = sorted(kind for kind in kinds if kind != "advisory" and f"`{kind}`" not in GLOBAL_ORDER)
    assert unplaced == []
    assert "advisory lock" in GLOBAL_ORDER


def test_the_kinds_read_from_a_lock_module_cover_the_orm_and_sql_forms(tmp_path):
    (tmp_path / "locks.py").write_text(
        "def lock_order(order_id):\n    return Order.objects.select_for_update(no_key=True).get(id=order_id)\n\n\n"
        "def lock_owner(owner):\n    get_user_model().objects.select_for_update().filter(pk=owner.pk)\n\n\n"
        "def lock_basket(cursor, basket_id):\n"
        '    cursor.execute("SELECT id FROM shop_basket WHERE id = %s FOR SHARE", [basket_id])\n\n\n'
        "def lock_checkout(cursor, owner_id):\n"
        '    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [owner_id])\n'
    )
    assert locked_kinds(tmp_path / "locks.py") == {"Order", "get_user_model", "shop_basket", "advisory"}
    assert named_locks(tmp_path / "locks.py") == ["lock_order", "lock_owner", "lock_basket", "lock_checkout"]
