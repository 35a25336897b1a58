"""Row and advisory locks are taken in each app's lock module only (`<app>/locks.py`, in the order docs/locking.md
gives): a lock taken anywhere else, outside tests and migrations, fails here. Reads source text; no database."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK_SITE = re.compile(r"select_for_update\(|pg_advisory|advisory_xact_lock")
SKIPPED_DIRS = {"tests", "migrations", "node_modules"}


def lock_sites(root: Path) -> list[str]:
    """`path:line` of every lock taken outside a lock module under `root`."""
    sites = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if path.name == "locks.py" or any(part.startswith(".") or part in SKIPPED_DIRS for part in parts[:-1]):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if LOCK_SITE.search(line):
                sites.append(f"{path.relative_to(root)}:{number}")
    return sites


def test_no_lock_is_taken_outside_the_lock_modules():
    assert lock_sites(ROOT) == []


def test_a_lock_taken_in_a_services_module_is_found(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "locks.py").write_text("Order.objects.select_for_update(no_key=True)\n")
    (tmp_path / "shop" / "services.py").write_text(
        "x = 1\nOrder.objects.select_for_update().get(id=1)\ncursor.execute('SELECT pg_advisory_xact_lock(1)')\n"
    )
    assert lock_sites(tmp_path) == ["shop/services.py:2", "shop/services.py:3"]
