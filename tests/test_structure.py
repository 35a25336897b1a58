"""The code's shape, read as text: one home for the claim rule and for Run locks, tools below runtime, the provider
known only where runs are driven, a ground that imports no app, no oversized module, function or chat script. A change
that states a rule a second time, locks a run on the side or lets a lower floor reach up, fails here."""

import ast
import re
from pathlib import Path

from tests.lock_sites import lock_sites

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_DIRS = (
    "impo",
    "core",
    "accounts",
    "attachments",
    "runtime",
    "tools",
    "rebyte",
    "scheduling",
    "webhooks",
    "bench",
)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# The comment that lets a function run longer, on the line right above its `def` (or its decorators) or first in its
# body, says why: `# Long because …`.
LONG_FUNCTION_MARKER = "# Long because"
# Outside the repository's own code: the virtualenv, installed node packages, build metadata, caches.
NOT_OURS = {".venv", "node_modules", "impo.egg-info", "__pycache__", "var"}
CHAT_SCRIPTS = ROOT / "runtime" / "static" / "runtime"


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
    # Any lock in runtime (other models included, in any form: the ORM's or SQL's) is taken there, and no SQL locks
    # a run elsewhere.
    assert lock_sites(ROOT / "runtime") == []
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


def _every_python_module() -> list[Path]:
    """Every Python module of the repository, the harness, the double, the benchmarks and the tests included; only
    migrations (written by Django, never read as code) are left out."""
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not (parts := path.relative_to(ROOT).parts)[0].startswith(".")
        and not NOT_OURS.intersection(parts)
        and "migrations" not in parts
    ]


def _oversized(paths: list[Path]) -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): lines
        for path in paths
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }


def test_no_python_module_is_over_400_lines():
    assert _oversized(_every_python_module()) == {}


def test_no_chat_script_is_over_400_lines():
    # The vendored libraries (vendor/) are others' code, kept as released.
    assert _oversized(sorted(CHAT_SCRIPTS.glob("*.js"))) == {}


def _says_why_it_is_long(lines: list[str], function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the comment right above the `def` (or its decorators) starts with the marker, or one that opens
    the body (between the signature and the first statement) does."""
    first = min([function.lineno, *(decorator.lineno for decorator in function.decorator_list)])
    above = first - 1
    while above > 0 and lines[above - 1].lstrip().startswith("#"):
        above -= 1
    opening = lines[function.lineno - 1 : function.body[0].lineno - 1]
    return (above < first - 1 and lines[above].strip().startswith(LONG_FUNCTION_MARKER)) or any(
        line.strip().startswith(LONG_FUNCTION_MARKER) for line in opening
    )


def test_no_function_is_over_60_lines_unless_it_says_why():
    overlong = {}
    for path in _every_python_module():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and not _says_why_it_is_long(lines, node):
                    overlong[f"{path.relative_to(ROOT)}:{node.name}"] = length
    assert overlong == {}


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
    assert outside <= {"runtime/tasks.py", "runtime/templatetags/desk.py"}
    assert not {path for path in knowing if path.startswith("runtime/services/")}


APPS = ("accounts", "attachments", "runtime", "rebyte", "tools", "scheduling", "webhooks")


def test_the_ground_imports_no_app_and_not_the_roof():
    reaching_up = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in _production_modules("core")
        for name in _imported_modules(path)
        if name.split(".")[0] in {*APPS, "impo", "devtools"}
    }
    assert reaching_up == set()


def test_apps_never_import_the_roof_or_the_dev_harness():
    # The double and devtools/ are not in the built package (pyproject.toml): a shipped module that imported them
    # would fail where only the package is installed.
    reaching_up = {
        f"{path.relative_to(ROOT)}: {name}"
        for directory in ("core", *APPS)
        for path in _production_modules(directory)
        for name in _imported_modules(path)
        if name.split(".")[0] in {"impo", "devtools"} or name.startswith("rebyte.double")
    }
    assert reaching_up == set()
