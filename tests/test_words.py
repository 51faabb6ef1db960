"""Comments, docstrings and cards cite what a reader can open: a paper's section and a page
under ``docs/``, never an internal spec section ("SPEC 2b") or an issue number ("issue 31.7",
"#42"). The scan reads the comments and docstrings of every Python file, and every Markdown
file, under ``src/``, ``metrics/``, ``pipelines/``, ``spaces/``, ``benchmarks/`` and ``tests/`` (this file
aside: it holds the patterns). The house rules are in docs/guide/development.md.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "metrics", "pipelines", "spaces", "benchmarks", "tests")

#: an internal spec section ("SPEC 2b", "SPEC 4"); Scientific Python's specs are cited by URL
SPEC_SECTION = re.compile(r"\bSPEC \d")
#: an issue number ("issue 12", "Issue 31.7", "issues 31-33", "issue #4") or a bare "#42"
#: (two digits or more: "bird #3" is a count)
ISSUE_NUMBER = re.compile(r"\bissues? #?\d|(?<![\w&#/])#\d{2,}\b", re.IGNORECASE)
PATTERNS = {"an internal spec section": SPEC_SECTION, "an issue number": ISSUE_NUMBER}


def comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python source."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string.lstrip("#")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                for offset, line in enumerate(body[0].value.value.splitlines()):
                    yield body[0].lineno + offset, line


def scanned_text(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) to scan: a Python file's comments and docstrings, a Markdown file's lines."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".py", ".pyi"):
        yield from comments_and_docstrings(text)
    else:
        yield from enumerate(text.splitlines(), start=1)


def unreadable_references(path: Path) -> list[str]:
    """``path:line: <what>: <text>`` for every spec section or issue number in ``path``."""
    found = []
    for line, text in scanned_text(path):
        for what, pattern in PATTERNS.items():
            if pattern.search(text):
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{shown}:{line}: {what}: {text.strip()[:100]}")
    return found


def scanned_files() -> list[Path]:
    """Every Python and Markdown file of the scanned folders, this file and build outputs aside."""
    files = []
    for folder in FOLDERS:
        for suffix in ("*.py", "*.pyi", "*.md"):
            files.extend(
                p
                for p in (ROOT / folder).rglob(suffix)
                if p.resolve() != Path(__file__).resolve()
                and "__pycache__" not in p.parts
                and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
            )
    return sorted(files)


def test_no_internal_spec_section_or_issue_number_in_comments_docstrings_or_cards():
    files = scanned_files()
    assert len(files) > 300, "the scan found too few files to be looking in the right place"
    found = [hit for path in files for hit in unreadable_references(path)]
    assert not found, "cite a paper's section and a docs/ page instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        "# tie per pair (SPEC 1)",
        '"""Curation by SPEC 2b."""',
        "# the bug of issue 31.7",
        "# see Issue 12",
        "# issues 31-33 again",
        "# fixed in #42",
        '"""Known answers (issue #4)."""',
    ],
)
def test_the_scan_finds_each_kind_of_reference(tmp_path, text):
    path = tmp_path / "probe.py"
    path.write_text(f"{text}\n\nx = 1  # plain\n", encoding="utf-8")
    assert len(unreadable_references(path)) == 1


@pytest.mark.parametrize(
    "text",
    [
        "# colour '#ff0000' and a hex '#1a'",
        "# SUB Sec. 4.3, App. E; docs/human_validation.md",
        "# the 2nd item of the tuple",
        '"""Scientific Python\'s lazy loading (spec-0001)."""',
        "x = 'issue 12'  # a string that is not a docstring",
        "# an anchor like page.md#section-2",
    ],
)
def test_the_scan_leaves_ordinary_text_alone(tmp_path, text):
    path = tmp_path / "probe.py"
    path.write_text(text + "\n", encoding="utf-8")
    assert unreadable_references(path) == []
