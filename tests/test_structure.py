"""The code's shape, read as text: one home for the claim rule and for Run locks, tools below runtime, the provider
known only where runs are driven, a ground that imports no app, no oversized modules. A change that states a rule a
second time, locks a run on the side or lets a lower floor reach up, fails here."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_DIRS = ("impo", "runtime", "tools", "rebyte", "scheduling", "webhooks", "bench")
MAX_MODULE_LINES = 400


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
    lease = {"runtime/services/claims.py"}
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


def test_no_production_module_is_over_400_lines():
    oversized = {
        str(path.relative_to(ROOT)): lines
        for path in _production_modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert oversized == {}


def _imported_modules(path: Path) -> set[str]:
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return imported


def _importers(directory: str, prefix: str) -> set[str]:
    return {
        str(path.relative_to(ROOT))
        for path in _production_modules(directory)
        if any(name == prefix or name.startswith(prefix + ".") for name in _imported_modules(path))
    }


def test_in_runtime_only_the_execution_package_and_the_worker_glue_know_the_provider():
    knowing = _importers("runtime", "rebyte")
    outside = {path for path in knowing if not path.startswith("runtime/execution/")}
    # The Celery task builds the provider gateway at worker start; the sweeper command and the staff desk's
    # template tags read the provider's bindings to show and settle them.
    assert outside <= {"runtime/tasks.py", "runtime/management/commands/run_sweeper.py", "runtime/templatetags/desk.py"}
    assert not {path for path in knowing if path.startswith("runtime/services/")}


def test_the_ground_imports_no_app_and_not_the_roof():
    reaching_up = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in _production_modules("impo/core")
        for name in _imported_modules(path)
        if name.split(".")[0] in {"runtime", "rebyte", "tools", "scheduling", "webhooks"}
        or (name.split(".")[0] == "impo" and not name.startswith("impo.core") and name != "impo")
    }
    assert reaching_up == set()


def test_apps_never_import_the_roof():
    roof = {
        "impo.settings",
        "impo.urls",
        "impo.asgi",
        "impo.celery",
        "impo.worker_host",
        "impo.web_server",
        "impo.health",
        "impo.metrics",
        "impo.broker",
        "impo.http_handler",
        "impo.worker_liveness",
    }
    reaching_up = {
        f"{path.relative_to(ROOT)}: {name}"
        for directory in ("runtime", "rebyte", "tools", "scheduling", "webhooks")
        for path in _production_modules(directory)
        for name in _imported_modules(path)
        if name in roof or any(name.startswith(module + ".") for module in roof)
    }
    assert reaching_up == set()
