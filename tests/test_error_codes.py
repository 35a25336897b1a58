"""Every error code a client can meet is written once, in `core/error_codes.py`, and the OpenAPI schema lists it.

Read as text: a code typed as a string literal anywhere else (a new refusal, a new tool error) fails here, so the
catalogue, its HTTP statuses and the schema cannot drift from what the code sends.
"""

import ast
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator

from core.error_codes import HTTP_CODES, RUN_ERROR_CODES, START_OVER_REASONS, TOOL_ERROR_CODES, ErrorCode

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "core" / "error_codes.py"
# The double speaks for the provider: its codes are the provider's own, passed through, not ours.
SKIPPED_DIRS = {".venv", "node_modules", "tests", "migrations", ".git", "double"}

# The same word as a code, naming something else.
NOT_AN_ERROR_CODE = {
    ("impo/settings.py", "timeout"): "an option of the database connection pool",
    ("runtime/models.py", "pending_reconciliation"): "RunState.PENDING_RECONCILIATION",
    ("rebyte/models.py", "pending_reconciliation"): "IntentState.PENDING_RECONCILIATION and its constraint",
    ("runtime/execution/following.py", "request_timeout"): "a provider's own code for a failed turn",
    ("devtools/records.py", "pending_reconciliation"): "a run state the chaos records count as settled",
    ("rebyte/sessions.py", "not_found"): "a RemoteSession's rotation_reason",
}


def _modules() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED_DIRS & set(path.relative_to(ROOT).parts) and path != CATALOGUE
    )


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _code_literals(source: str) -> list[tuple[int, str]]:
    """(line, code) of each string literal that is a catalogued code, or is given as a `code` (a dict's `"code"`
    value or a `code=` argument) whatever it says."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    codes = {code.value for code in ErrorCode}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in codes and id(node) not in docstrings:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _is_text(key, "code") and _is_text(value) and value.value not in codes:
                    found.append((value.lineno, value.value))
        elif isinstance(node, ast.keyword) and node.arg == "code" and _is_text(node.value):
            found.extend([] if node.value.value in codes else [(node.value.lineno, node.value.value)])
    return found


def _is_text(node, equal_to: str | None = None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and equal_to in (None, node.value)


def _literals_outside_the_catalogue() -> list[str]:
    found = []
    for path in _modules():
        name = str(path.relative_to(ROOT))
        for line, code in _code_literals(path.read_text(encoding="utf-8")):
            if (name, code) not in NOT_AN_ERROR_CODE:
                found.append(f"{name}:{line}: {code!r}")
    return found


def test_no_error_code_is_written_as_a_literal_outside_the_catalogue():
    assert _literals_outside_the_catalogue() == []


@pytest.mark.parametrize(
    "source",
    [
        'raise Conflict("Taken.", code="idempotency_conflict")',
        'body = {"error": {"code": "brand_new_code", "message": "m"}}',
        'raise Gone("Over.", code="brand_new_code")',
        'error_result("device_timeout", "late")',
    ],
)
def test_the_scan_finds_a_code_written_as_a_literal(source):
    assert _code_literals(source) != []


def test_the_scan_passes_a_code_named_from_the_catalogue():
    assert _code_literals('raise Conflict("Taken.", code=ErrorCode.IDEMPOTENCY_CONFLICT)') == []


def test_every_http_code_has_an_error_status_and_every_code_a_meaning():
    assert all(code.status is None or 400 <= code.status < 600 for code in ErrorCode)
    assert all(code.meaning.strip() for code in ErrorCode)


def test_every_code_has_a_place_where_a_client_meets_it():
    placed = {*HTTP_CODES, *RUN_ERROR_CODES, *TOOL_ERROR_CODES, *START_OVER_REASONS}

    assert set(ErrorCode) - placed == set()


def _enums(node) -> set[str]:
    if isinstance(node, dict):
        return set(node.get("enum", [])) | {value for child in node.values() for value in _enums(child)}
    if isinstance(node, list):
        return {value for child in node for value in _enums(child)}
    return set()


def test_every_code_in_the_catalogue_is_listed_in_the_schema():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    # The start-over reasons reach a client only in the event stream, which the OpenAPI schema does not describe.
    expected = {code.value for code in ErrorCode} - {code.value for code in START_OVER_REASONS}

    assert expected - _enums(schema) == set()
