"""The page's Markdown parser, sanitiser and highlighter are the npm packages' own files, at the pinned versions."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
VENDOR = ROOT / "runtime" / "static" / "runtime" / "vendor"
JS = ROOT / "tests" / "js"


@pytest.mark.parametrize(
    ("vendored", "package", "packaged"),
    [
        ("marked.umd.js", "marked", "lib/marked.umd.js"),
        ("purify.min.js", "dompurify", "dist/purify.min.js"),
        ("highlight.min.js", "@highlightjs/cdn-assets", "highlight.min.js"),
    ],
)
def test_a_vendored_library_is_the_locked_npm_packages_file_unchanged(vendored, package, packaged):
    pinned = json.loads((JS / "package.json").read_text())["dependencies"][package]
    installed = json.loads((JS / "node_modules" / package / "package.json").read_text())["version"]

    assert installed == pinned
    assert (VENDOR / vendored).read_bytes() == (JS / "node_modules" / package / packaged).read_bytes()
    assert f"| {pinned} |" in (VENDOR / "VERSIONS.md").read_text()
