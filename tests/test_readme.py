"""Every ```python block of the README runs, in order, in one namespace."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_has_examples():
    assert BLOCKS, "README.md should show runnable python examples"


@pytest.mark.slow
def test_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # examples load metrics/ and pipelines/ by relative path
    namespace: dict = {}
    for i, block in enumerate(BLOCKS):
        try:
            exec(compile(block, f"README.md block {i}", "exec"), namespace)
        except Exception as err:  # pragma: no cover - the message is the point
            raise AssertionError(f"README python block {i} failed:\n{block}") from err


def test_install_and_publish_sections_show_the_commands_the_wheel_test_runs():
    """tests/test_wheel.py runs these blocks in a fresh environment with the built wheel."""
    from test_wheel import readme_commands

    install = readme_commands("Install")
    assert "pip install concept-grounding" in install and "python -m build" in install
    assert any(c.startswith("concept-grounding demo --quick") for c in install)
    publish = readme_commands("Publish to the Hub")
    built = [c for c in publish if c.startswith("concept-grounding publish") and "--push" not in c]
    assert built and any("--push" in c for c in publish)


def test_sub_command_lines_parse_and_state_their_preprocessing():
    """Every `concept-grounding sub` line of the README parses, and each factory model (a plain
    module) states its normalisation: --mean and --std, or --no-normalize (issue 22.2)."""
    import shlex

    from concept_grounding.cli import build_parser

    section = re.search(r"^## Evaluate your own model\n(.*?)(?=^## )", (ROOT / "README.md").read_text(), re.S | re.M)
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), flags=re.S)
    lines = [re.sub(r"\s+#.*$", "", line) for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(line) for line in lines if " sub " in line]
    assert len(commands) >= 4
    for argv in commands:
        args = build_parser().parse_args(argv[argv.index("sub"):])
        if any(".py:" in model for model in args.model):
            assert (args.mean and args.std) or args.normalize is False, " ".join(argv)


def test_no_readme_command_runs_a_model_on_random_weights():
    """Issue 31.10: ``sub --model ViT-B-32`` (a bare open_clip architecture name, no pretrained
    tag) silently scored a randomly initialised CLIP. No command line of the README names one
    without its weights (``--pretrained``)."""
    import shlex

    import open_clip

    architectures = set(open_clip.list_models())
    text = (ROOT / "README.md").read_text()
    lines = [re.sub(r"\s+#.*$", "", line) for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
             for line in block.replace("\\\n", " ").splitlines()]
    named = [(argv[i + 1], "--pretrained" in argv) for argv in (shlex.split(line) for line in lines
                                                                  if "concept-grounding" in line)
             for i, arg in enumerate(argv[:-1]) if arg in ("--model", "--clip-model")]
    assert named and not [m for m, pretrained in named if m in architectures and not pretrained], named


def test_the_blocks_the_readme_test_cannot_run_import_what_they_use():
    """Issue 31.14: the FLUX.1-dev block (needs the Hub and a GPU, so not run) had no imports and
    used diffusers' deprecated ``torch_dtype=``. Each ```py block compiles and passes ``dtype=``;
    the Hub blocks (``DiffusionPipeline.from_pretrained``) import every name they use (the others
    use the reader's own objects)."""
    import ast
    import builtins

    blocks = re.findall(r"```py\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        tree = ast.parse(block)
        bound = {a.asname or a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for a in node.names}
        bound |= {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets
                  if isinstance(t, ast.Name)}
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if "DiffusionPipeline.from_pretrained" in block:
            assert not used - bound - set(dir(builtins)), (used - bound, block)
        assert "torch_dtype=" not in block, block
