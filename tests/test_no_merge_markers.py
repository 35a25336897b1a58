"""No file of the project keeps a merge's conflict markers: one once reached docs/operations.md unseen."""

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)
NOT_OURS = {".git", ".venv", "node_modules", "var", "__pycache__", ".pytest_cache", ".ruff_cache"}
TEXT = {".py", ".md", ".js", ".css", ".html", ".toml", ".txt", ".json", ".yml", ".yaml", ".lock", ""}


def _files(directory: Path):
    for path in directory.iterdir():
        if path.name in NOT_OURS:
            continue
        if path.is_dir():
            yield from _files(path)
        elif path.suffix in TEXT:
            yield path


def test_no_file_holds_conflict_markers():
    marked = [
        str(path.relative_to(REPO_ROOT))
        for path in _files(REPO_ROOT)
        if MARKER.search(path.read_text(errors="replace"))
    ]
    assert marked == []
