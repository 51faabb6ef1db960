"""The command line: every sub-command answers --help quickly and parses."""

import argparse
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
    bad = subprocess.run(
        [sys.executable, "-m", "concept_grounding.cli", "bench", "--epochs", "zero"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--epochs" in bad.stderr and "Traceback" not in bad.stderr


def _subparsers():
    """Every command's parser; a command with steps (``candidates classes``) by each step."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, sub in action.choices.items():
        steps = next((a for a in sub._actions if isinstance(a, argparse._SubParsersAction)), None)
        out.update({f"{name} {step}": p for step, p in steps.choices.items()} if steps else {name: sub})
    return out


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_every_option_has_help_text_and_shows_its_default(name):
    """Each option has a line of help, and each one that takes a value says its
    default (the formatter appends ``(default: X)`` unless the text names the default)."""
    sub = _subparsers()[name]
    formatter = sub._get_formatter()
    shown_dests = {a.dest for a in sub._actions if a.help != argparse.SUPPRESS}
    for action in sub._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction) or action.dest == "debug":
            continue
        if action.help == argparse.SUPPRESS and action.dest in shown_dests:
            continue  # a deprecated spelling of a shown option (concept_grounding.settings aliases)
        flag = action.option_strings[-1]
        assert action.help and action.help != argparse.SUPPRESS and len(action.help.split()) >= 2, f"{name} {flag}"
        if action.nargs != 0 and not action.required:
            shown = formatter._expand_help(action)
            assert "default" in shown, f"{name} {flag}: {shown!r}"
            if (
                action.default not in (None, argparse.SUPPRESS)
                and "(default: " in shown
                and "%(default)" not in action.help
            ):
                assert str(action.default) in shown, f"{name} {flag}: {shown!r}"
    text = sub.format_help()
    assert "(default: " in text


def test_the_readme_world_command_writes_what_the_readme_says():
    """The README's ``concept-grounding world`` command writes the DatasetDict,
    the CUB folder and the SUB folder it promises."""
    import re
    import shlex
    from pathlib import Path

    from concept_grounding.commands.world import config_from_args

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    command = re.search(r"`(concept-grounding world [^`]*)`", readme).group(1)
    args = build_parser().parse_args(shlex.split(command)[1:])
    config = config_from_args(args)
    assert config.writes_cub and config.writes_sub


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_names_its_extra(name):
    from concept_grounding.extras import COMMAND_EXTRAS, EXTRAS

    assert name in COMMAND_EXTRAS and COMMAND_EXTRAS[name] in (None, *EXTRAS)


def test_a_command_whose_extra_is_missing_says_which_to_install(monkeypatch, capsys):
    """One line, exit 2, before ``run`` imports anything: ``pip install "concept-grounding[tdg]"``."""
    import importlib.util

    from concept_grounding import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "diffusers" else real(name, *a))
    assert cli.main(["generate", "--help"]) == 0  # parsing needs no extra
    capsys.readouterr()
    assert cli.main(["generate", "--out", "x", "--tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "concept-grounding: error: concept-grounding generate needs the [tdg] extra (diffusers missing): "
        'pip install "concept-grounding[tdg]"'
    )
    with pytest.raises(ImportError, match=r"\[cci\] extra"):
        cli.dispatch(["explain", "--out", "x"])
