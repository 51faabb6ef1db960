"""Every example of the README and of the manual's pages (``docs/**/*.md``) runs.

A page's ```python / ```py blocks run in order, in one namespace per page, from the repository
root (the examples load ``metrics/`` and ``pipelines/`` by relative path). A block that cannot
run here (it needs the Hub and a GPU, or the reader's own objects) is preceded by the marker
``<!-- no-run: <reason> -->``; it is still compiled and checked for its imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the README and every page of the manual (docs/README.md included: overview.md shows it)
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"(<!-- no-run:([^\n]*?)-->\n)?```(python|py)\n(.*?)```", flags=re.S)


@dataclass(frozen=True)
class Block:
    """One Python code block of a page: its source, and why it does not run (``None``: it runs)."""

    code: str
    no_run: str | None


def python_blocks(page: Path) -> list[Block]:
    """The ```python / ```py blocks of ``page`` in order, each with its ``no-run`` reason."""
    return [
        Block(code, reason.strip() if marker else None)
        for marker, reason, _, code in _BLOCK.findall(page.read_text(encoding="utf-8"))
    ]


def page_text(page: Path, section: str | None = None) -> str:
    """``page``'s text, or the part under its ``## <section>`` heading (up to the next ``## ``)."""
    text = page.read_text(encoding="utf-8")
    if section is None:
        return text
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert match, f"{page.relative_to(ROOT)} has no '## {section}' section"
    return match.group(1)


def shell_lines(text: str, languages: str = "bash") -> list[str]:
    """The command lines of ``text``'s ```<language> blocks, continuations joined, comments stripped."""
    return [
        re.sub(r"\s+#.*$", "", line)
        for block in re.findall(rf"```(?:{languages})\n(.*?)```", text, flags=re.S)
        for line in block.replace("\\\n", " ").splitlines()
    ]


RUNNABLE = [page for page in PAGES if any(b.no_run is None for b in python_blocks(page))]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def test_readme_has_examples():
    assert [b for b in python_blocks(README) if b.no_run is None], "README.md should show runnable python examples"


def test_the_guide_pages_have_examples_too():
    """The guide's pages carry the examples the README used to: they run below."""
    pages = {_name(p) for p in RUNNABLE}
    assert {
        "README.md",
        "docs/guide/tdg.md",
        "docs/guide/metrics.md",
        "docs/guide/world.md",
        "docs/guide/evaluate-your-own-model.md",
        "docs/guide/cci.md",
    } <= pages, pages


def test_no_run_markers_say_why_and_are_rare():
    marked = [(page, b) for page in PAGES for b in python_blocks(page) if b.no_run is not None]
    assert all(b.no_run for _, b in marked), "a no-run marker needs its reason: <!-- no-run: why -->"
    total = sum(len(python_blocks(page)) for page in PAGES)
    assert len(marked) * 3 < total, f"{len(marked)} of {total} blocks are not run"


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_page_examples_run(page, monkeypatch):
    monkeypatch.chdir(ROOT)  # examples load metrics/ and pipelines/ by relative path
    namespace: dict = {}
    for i, block in enumerate(python_blocks(page)):
        if block.no_run is not None:
            continue
        try:
            exec(compile(block.code, f"{_name(page)} block {i}", "exec"), namespace)
        except Exception as err:  # pragma: no cover - the message is the point
            raise AssertionError(f"{_name(page)}: python block {i} failed:\n{block.code}") from err


def test_install_and_publish_sections_show_the_commands_the_wheel_test_runs():
    """tests/test_wheel.py runs these blocks in a fresh environment with the built wheel."""
    from test_wheel import INSTALL_PAGE, PUBLISH_PAGE, page_commands

    install = page_commands(INSTALL_PAGE, "Install")
    assert "pip install concept-grounding" in install and "python -m build" in install
    assert any(c.startswith("concept-grounding demo --quick") for c in install)
    publish = page_commands(PUBLISH_PAGE, "Publish to the Hub")
    built = [c for c in publish if c.startswith("concept-grounding publish") and "--push" not in c]
    assert built and any("--push" in c for c in publish)


def test_sub_command_lines_parse_and_state_their_preprocessing():
    """Every `concept-grounding sub` line of the guide's "Evaluate your own model" page parses, and each
    factory model (a plain module) states its normalisation: --mean and --std, or --no-normalize."""
    import shlex

    from concept_grounding.cli import build_parser

    lines = shell_lines(page_text(ROOT / "docs" / "guide" / "evaluate-your-own-model.md"))
    commands = [shlex.split(line) for line in lines if " sub " in line]
    assert len(commands) >= 4
    for argv in commands:
        args = build_parser().parse_args(argv[argv.index("sub") :])
        if any(".py:" in model for model in args.model):
            assert (args.mean and args.std) or args.normalize is False, " ".join(argv)


def test_no_command_of_the_readme_or_manual_runs_a_model_on_random_weights():
    """``sub --model ViT-B-32`` (a bare open_clip architecture name, no pretrained
    tag) silently scored a randomly initialised CLIP. No command line of the README or of the
    manual names one without its weights (``--pretrained``)."""
    import shlex

    import open_clip

    architectures = set(open_clip.list_models())
    lines = [line for page in PAGES for line in shell_lines(page_text(page), "bash|sh")]
    named = [
        (argv[i + 1], "--pretrained" in argv)
        for argv in (shlex.split(line) for line in lines if "concept-grounding" in line)
        for i, arg in enumerate(argv[:-1])
        if arg in ("--model", "--clip-model")
    ]
    assert named and not [m for m, pretrained in named if m in architectures and not pretrained], named


def test_the_blocks_the_tests_cannot_run_import_what_they_use():
    """The FLUX.1-dev block (needs the Hub and a GPU, so not run) had no imports and
    used diffusers' deprecated ``torch_dtype=``. Each no-run block compiles and passes ``dtype=``;
    the Hub blocks (``DiffusionPipeline.from_pretrained``) import every name they use (the others
    use the reader's own objects)."""
    import ast
    import builtins

    blocks = [(page, b.code) for page in PAGES for b in python_blocks(page) if b.no_run is not None]
    assert [page for page, _ in blocks if page == README]
    for page, block in blocks:
        tree = ast.parse(block, _name(page))
        bound = {
            a.asname or a.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for a in node.names
        }
        bound |= {
            t.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if "DiffusionPipeline.from_pretrained" in block:
            assert not used - bound - set(dir(builtins)), (_name(page), used - bound, block)
        assert "torch_dtype=" not in block, (_name(page), block)


def test_the_readme_is_a_landing_page_that_links_every_guide_page():
    """The README is at most 300 lines and links each page of the guide, and each
    guide page is in the manual's nav."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs" / "guide").glob("*.md")):
        assert f"]({_name(page)})" in text, f"README.md does not link {_name(page)}"
        assert f" {page.relative_to(ROOT / 'docs').as_posix()}\n" in nav, f"mkdocs.yml's nav lacks {_name(page)}"
