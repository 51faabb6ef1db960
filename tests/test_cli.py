"""The command line: every sub-command answers --help quickly and parses."""

import subprocess
import sys

import pytest

from concept_grounding.cli import COMMANDS, build_parser


def test_help_lists_every_command():
    text = build_parser().format_help()
    for name in COMMANDS:
        assert name in text


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_subcommand_help(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([name, "--help"])
    assert exit_info.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "concept_grounding.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "COMMAND" in out.stdout


def test_parsing_every_command_imports_no_heavy_library():
    """``--help`` and argument errors answer before torch & co. are imported (~2 s each):
    every command's parser is built from torch-free modules (``models.train_config``, the
    job configs), and the heavy imports happen in ``run``."""
    code = (
        "import sys; from concept_grounding.cli import COMMANDS, build_parser; p = build_parser();"
        "print([m for m in ('torch', 'transformers', 'diffusers', 'datasets', 'gradio', 'sklearn', 'matplotlib',"
        " 'open_clip') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    bad = subprocess.run([sys.executable, "-m", "concept_grounding.cli", "bench", "--epochs", "zero"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--epochs" in bad.stderr and "Traceback" not in bad.stderr
