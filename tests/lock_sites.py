"""Where the source takes a lock, read in every form one can take: the ORM's `select_for_update`, and, in any string,
a locking clause (`FOR UPDATE`, `FOR NO KEY UPDATE`, `FOR SHARE`, `FOR KEY SHARE`), `LOCK TABLE` or an advisory
lock (`pg_advisory_lock`, `pg_advisory_xact_lock`, `pg_try_advisory_…`). Docstrings and comments only speak of
locks and are not read. Shared by the lock guard (tests/test_lock_sites.py), the structure test and the test that
docs/locking.md names every lock."""

import ast
import re
from dataclasses import dataclass
from pathlib import Path

LOCK_IN_SQL = re.compile(
    r"\bFOR\s+(?:NO\s+KEY\s+UPDATE|UPDATE|KEY\s+SHARE|SHARE)\b|\bpg_(?:try_)?advisory_\w*lock|\bLOCK\s+TABLE\b",
    re.IGNORECASE,
)
ORM_LOCK = "select_for_update"
ADVISORY = re.compile(r"\bpg_(?:try_)?advisory_", re.IGNORECASE)
SKIPPED_DIRS = {"tests", "migrations", "node_modules"}
# The places outside the lock modules where a lock form may stand, each with its reason (`path::function`).
LISTED = {
    "bench/execution.py::bare_skip_locked_rate": (
        "the claim benchmark's yardstick: a bare SELECT … FOR UPDATE SKIP LOCKED on a table of its own "
        "(bench_claim_rows) that no product path touches, measured against the claim rule"
    ),
    "bench/execution.py::DatabaseWork._count": (
        "reads each statement the benchmark captured for a locking clause, to count write transactions; takes none"
    ),
    "bench/execution.py::measure": "names that yardstick in the benchmark's results; takes no lock",
}


@dataclass(frozen=True)
class LockSite:
    path: str
    line: int
    function: str  # the enclosing function's qualified name, "" at module level

    @property
    def place(self) -> str:
        return f"{self.path}::{self.function}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def lock_sites(root: Path) -> list[LockSite]:
    """Every lock form found outside a lock module (`locks.py`) under `root`, tests and migrations aside."""
    return [
        site
        for path in python_modules(root)
        if path.name != "locks.py"
        for site in _sites_in(path, str(path.relative_to(root)))
    ]


def python_modules(root: Path) -> list[Path]:
    modules = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if not any(part.startswith(".") or part in SKIPPED_DIRS for part in parts[:-1]):
            modules.append(path)
    return modules


def lock_modules(root: Path) -> list[Path]:
    return [path for path in python_modules(root) if path.name == "locks.py"]


def _sites_in(path: Path, name: str) -> list[LockSite]:
    sites: dict[int, LockSite] = {}
    for node, function in _walk(ast.parse(path.read_text(encoding="utf-8"))):
        line = None
        if isinstance(node, ast.Attribute) and node.attr == ORM_LOCK:
            line = node.end_lineno
        elif _is_string(node) and (match := LOCK_IN_SQL.search(node.value) or re.search(ORM_LOCK, node.value)):
            line = node.lineno + node.value[: match.start()].count("\n")
        if line is not None:
            sites.setdefault(line, LockSite(name, line, function))
    return sorted(sites.values(), key=lambda site: site.line)


def _walk(tree: ast.Module):
    """Every node with the qualified name of the function it stands in, bare string statements (docstrings) left
    out."""
    stack = [(tree, "")]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, ast.Expr) and _is_string(node.value):
            continue
        yield node, scope
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = f"{scope}.{node.name}" if scope else node.name
        stack.extend((child, scope) for child in ast.iter_child_nodes(node))


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def named_locks(path: Path) -> list[str]:
    """The lock module's public functions, and its public constants that hold a locking statement for another
    module to run."""
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and _is_string(node.value) and LOCK_IN_SQL.search(node.value.value):
            names += [target.id for target in node.targets if not target.id.startswith("_")]
    return names


def locked_kinds(path: Path) -> set[str]:
    """What the lock module locks: the models its `select_for_update` calls start from (`get_user_model()` as
    "get_user_model"), the tables its locking statements read FROM, and "advisory" for an advisory lock."""
    kinds = set()
    for node, _ in _walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == ORM_LOCK:
            kinds.add(_model_of(node.value))
        elif _is_string(node) and LOCK_IN_SQL.search(node.value):
            kinds.update(re.findall(r"\bFROM\s+(\w+)", node.value, re.IGNORECASE))
            if ADVISORY.search(node.value):
                kinds.add("advisory")
    return kinds


def _model_of(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Call):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            base = node.value
            return base.func.id if isinstance(base, ast.Call) else base.id
        node = node.func if isinstance(node, ast.Call) else node.value
    raise ValueError(f"no model found under a select_for_update at line {node.lineno}")
