"""The code's shape, read as text: one home for the claim rule and for Run locks, tools below runtime, no
oversized modules. A change that states a rule a second time, or locks a run on the side, fails here."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_DIRS = ("impo", "runtime", "tools", "rebyte", "scheduling", "webhooks", "bench")
MAX_MODULE_LINES = 500


def _production_modules(*dirs: str) -> list[Path]:
    modules = []
    for directory in dirs or PRODUCTION_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "migrations" in parts or "double" in parts:
                continue
            modules.append(path)
    return modules


def _modules_containing(pattern: str) -> set[str]:
    regex = re.compile(pattern)
    return {
        str(path.relative_to(ROOT)) for path in _production_modules() if regex.search(path.read_text(encoding="utf-8"))
    }


def test_each_condition_of_the_claim_is_stated_in_the_lease_module_only():
    lease = {"runtime/services/lease.py"}
    # queued and not backing off; lease expired; cancelled before its input left; attempts left; earlier run unfinished
    assert _modules_containing(r"not_before(__gt|__lte|\s*[<>]=?)") == lease
    assert _modules_containing(r"lease_expires_at(__lt|__lte|\s*<=?)\b") == lease
    assert _modules_containing(r"input_sent_at__isnull|input_sent_at IS (NOT )?NULL") == lease
    assert _modules_containing(r"settings\.IMPO_RUN_MAX_ATTEMPTS") == lease
    assert _modules_containing(r"submission__user_message__sequence__lt") == lease


def test_run_rows_are_locked_only_in_runtime_locks():
    locks = {"runtime/locks.py"}
    assert _modules_containing(r"Run\.objects\.select_for_update|Run\.objects\s*\.\s*select_for_update") <= locks
    # Any row lock in runtime (other models included) is taken there, and no SQL locks a run elsewhere.
    runtime_locks = {
        str(path.relative_to(ROOT))
        for path in _production_modules("runtime")
        if re.search(r"select_for_update|FOR (NO KEY )?UPDATE", path.read_text(encoding="utf-8"))
    }
    assert runtime_locks == locks
    assert _modules_containing(r"FOR (NO KEY )?UPDATE OF run\b") <= locks


def test_tools_import_nothing_of_runtime_but_its_models():
    offending = []
    for path in _production_modules("tools"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
                runtime = [name for name in names[:1] if name.split(".")[0] == "runtime"]
                if runtime and node.module != "runtime.models":
                    offending.append(f"{path.relative_to(ROOT)}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "runtime" and alias.name != "runtime.models":
                        offending.append(f"{path.relative_to(ROOT)}: import {alias.name}")
    assert offending == []


def test_no_production_module_is_over_500_lines():
    oversized = {
        str(path.relative_to(ROOT)): lines
        for path in _production_modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert oversized == {}
