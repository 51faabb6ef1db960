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
