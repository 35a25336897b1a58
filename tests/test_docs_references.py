"""Every reference the code and the docs make to the docs resolves inside the repository: a `docs/…` path names a
file that exists, a `§N` or `§N.M` names a section heading of the document it cites (docs/design.md when the
citation is bare inside that document), a quoted heading after a docs path or the README (`docs/api.md "Webhooks"`) is a
heading of that page, and a Markdown link reaches an existing file and anchor. Read as text: no process, no database."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {".git", ".venv", "node_modules", "vendor", "migrations", "var", "__pycache__", "screenshots"}
CODE_SUFFIXES = {".py", ".js", ".html", ".md"}
CODE_NAMES = {"Makefile", "Procfile"}

DOC_PATH = re.compile(r"(?:(?<=\.\./)|(?<![\w/.-]))docs/[\w./-]*\w")
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)*)")
# A document named just before a § (`docs/design.md §1.4`, `[design.md §2]`): only separators and further §s between.
CITED_DOCUMENT = re.compile(r"((?:\.\./)?(?:docs/)?[\w-]+\.md)((?:[\s\]\)`\"',;]|and\s|§\s?\d+(?:\.\d+)*)*)$")
# A § in a link's text cites the document the link reaches: `[§2](design.md#s2)`.
LINKED_DOCUMENT = re.compile(r"^[^\[\]]*\]\(([^)#\s]+\.md)")
EXTERNAL_SECTION = re.compile(r"RFC\s?\d+\s*$")
QUOTED_HEADING = re.compile(r"(docs/[\w./-]*\.md|README(?:\.md)?)\s+[\"']([^\"']+)[\"']")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def _sources() -> list[Path]:
    sources = []
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(directory, name)
            # This module's own examples dangle on purpose.
            if (path.suffix in CODE_SUFFIXES or name in CODE_NAMES) and path != Path(__file__).resolve():
                sources.append(path)
    return sources


def _headings(document: Path) -> list[str]:
    return HEADING.findall(document.read_text(encoding="utf-8"))


def _sections(document: Path) -> set[str]:
    return {match.group(1) for heading in _headings(document) if (match := re.match(r"§(\d+(?:\.\d+)*)\b", heading))}


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(document: Path) -> set[str]:
    text = document.read_text(encoding="utf-8")
    return {_slug(heading) for heading in _headings(document)} | set(EXPLICIT_ANCHOR.findall(text))


def _document(name: str, source: Path) -> Path:
    """A cited document: a `docs/…` path from the repository's root, any other `x.md` from the citing file's folder."""
    return ROOT / name if name.startswith("docs/") else source.parent / name


def dangling_references(source: Path, text: str) -> list[str]:
    """What in `text` (the contents of `source`) cites something of the docs that does not exist."""
    problems = []
    where = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
    own_sections = source.suffix == ".md" and source.exists() and _sections(source)
    for number, line in enumerate(text.splitlines(), start=1):
        for match in DOC_PATH.finditer(line):
            if not (ROOT / match.group()).exists():
                problems.append(f"{where}:{number}: {match.group()} does not exist")
        for match in SECTION.finditer(line):
            before = line[: match.start()]
            if EXTERNAL_SECTION.search(before):
                continue
            cited = CITED_DOCUMENT.search(before) or LINKED_DOCUMENT.search(line[match.end() :])
            if cited:
                document = _document(cited.group(1), source)
            elif own_sections:
                document = source
            else:
                problems.append(f"{where}:{number}: {match.group()} names no document")
                continue
            if not document.is_file():
                problems.append(f"{where}:{number}: {match.group()} cites {cited.group(1)}, which does not exist")
            elif match.group(1) not in _sections(document):
                problems.append(f"{where}:{number}: {document.relative_to(ROOT)} has no section {match.group()}")
        for match in QUOTED_HEADING.finditer(line):
            document = ROOT / ("README.md" if match.group(1).startswith("README") else match.group(1))
            if document.is_file() and match.group(2) not in _headings(document):
                problems.append(f"{where}:{number}: {match.group(1)} has no heading {match.group(2)!r}")
        if source.suffix != ".md":
            continue
        for match in MARKDOWN_LINK.finditer(line):
            target, _, anchor = match.group(1).partition("#")
            if re.match(r"[a-z]+:", target) or target.startswith("/"):
                continue
            document = (source.parent / target) if target else source
            if not document.exists():
                problems.append(f"{where}:{number}: the link to {match.group(1)} reaches no file")
            elif anchor and document.suffix == ".md" and anchor not in _anchors(document):
                problems.append(f"{where}:{number}: {target or source.name} has no anchor #{anchor}")
    return problems


def test_every_docs_path_section_heading_and_link_in_code_and_docs_resolves():
    problems = [problem for path in _sources() for problem in dangling_references(path, path.read_text("utf-8"))]
    assert problems == []


def test_every_section_of_the_design_contract_has_its_number_as_a_heading_and_an_anchor():
    design = ROOT / "docs" / "design.md"
    numbers = {"1", *(f"1.{n}" for n in range(1, 7)), *(str(n) for n in range(2, 13))}
    assert _sections(design) == numbers
    assert {f"s{number}" for number in numbers} <= _anchors(design)


def test_a_dangling_reference_is_reported():
    source = ROOT / "runtime" / "example.py"
    text = "\n".join(
        [
            "# fenced (docs/design.md §1.3, §1.9)",
            "# see docs/nowhere.md",
            "# the rule of DESIGN §4",
            '# limits (docs/operations.md "No such heading")',
            '# as README "Security" said',
            "# RFC 4291 §2.5.5.1 is another document's section",
        ]
    )
    assert dangling_references(source, text) == [
        "runtime/example.py:1: docs/design.md has no section §1.9",
        "runtime/example.py:2: docs/nowhere.md does not exist",
        "runtime/example.py:3: §4 names no document",
        "runtime/example.py:4: docs/operations.md has no heading 'No such heading'",
        "runtime/example.py:5: README has no heading 'Security'",
    ]


def test_a_broken_link_in_a_doc_is_reported():
    source = ROOT / "docs" / "example.md"
    text = "See [the API](api.md#no-such-anchor), [gone](gone.md) and [§2](design.md#s2)."
    assert dangling_references(source, text) == [
        "docs/example.md:1: api.md has no anchor #no-such-anchor",
        "docs/example.md:1: the link to gone.md reaches no file",
    ]
