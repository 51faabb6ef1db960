"""The CLI's error boundary: user errors exit 2 in one line, bugs exit 1, --debug shows the traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

import concept_grounding.commands.world as world_command
from concept_grounding.cli import DEBUG_ENV, dispatch, main
from concept_grounding.errors import UsageError, read_text_file, user_message


@pytest.fixture(autouse=True)
def no_debug_env(monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)


def _fail_with(monkeypatch, exc: BaseException) -> None:
    def run(args):
        raise exc

    monkeypatch.setattr(world_command, "run", run)


@pytest.mark.parametrize(
    "exc, expected",
    [
        (UsageError("must be >= 1", argument="--n", hint="try 2"), "--n: must be >= 1; try 2"),
        (FileNotFoundError(2, "No such file or directory", "/data/x.txt"), "/data/x.txt: no such file or folder"),
        (PermissionError(13, "Permission denied", "/data/y.txt"), "/data/y.txt: permission denied"),
        (IsADirectoryError(21, "Is a directory", "/data"), "/data: is a folder, expected a file"),
        (ValueError("keep_fraction must lie in (0, 1], got 2"), "keep_fraction must lie in (0, 1], got 2"),
        (OSError("We couldn't connect to the Hub\n   to load this model"), "We couldn't connect to the Hub to load"),
        (ModuleNotFoundError("No module named 'gradio'", name="gradio"), "optional package 'gradio'"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "a file is not UTF-8 text"),
    ],
)
def test_expected_errors_print_one_line_and_exit_2(monkeypatch, capsys, exc, expected):
    _fail_with(monkeypatch, exc)
    assert main(["world", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("concept-grounding: error: ") and expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("exc", [ZeroDivisionError("division by zero"), KeyError("x"), TypeError("bad operand")])
def test_bugs_exit_1_and_point_at_debug(monkeypatch, capsys, exc):
    _fail_with(monkeypatch, exc)
    assert main(["world", "--out", "x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"concept-grounding: internal error: {type(exc).__name__}")
    assert "rerun with --debug" in err and "Traceback" not in err


@pytest.mark.parametrize("how", [["--debug", "world"], ["world", "--debug"], "env"])
def test_debug_shows_the_traceback(monkeypatch, capsys, how):
    _fail_with(monkeypatch, ZeroDivisionError("division by zero"))
    argv = ["world", "--out", "x"]
    if how == "env":
        monkeypatch.setenv(DEBUG_ENV, "1")
    else:
        argv = [*how, "--out", "x"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "ZeroDivisionError: division by zero" in err
    assert "rerun with --debug" not in err


def test_debug_with_a_user_error_keeps_exit_2(monkeypatch, capsys):
    _fail_with(monkeypatch, UsageError("bad", argument="--x"))
    assert main(["--debug", "world", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("concept-grounding: error: --x: bad")


def test_interrupt_exits_130(monkeypatch, capsys):
    _fail_with(monkeypatch, KeyboardInterrupt())
    assert main(["world", "--out", "x"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_help_still_exits_0(capsys):
    assert main(["--help"]) == 0 and "COMMAND" in capsys.readouterr().out


def test_dispatch_lets_errors_through(monkeypatch):
    """In-process callers (demo) get the exception; the outer main prints it once."""
    _fail_with(monkeypatch, UsageError("bad", argument="--x"))
    with pytest.raises(UsageError):
        dispatch(["world", "--out", "x"])


def test_read_text_file_names_the_file_and_line(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"fine\nstill fine\nbad \xff byte\n")
    with pytest.raises(UsageError, match=r"notes.txt, line 3: not UTF-8 text \(byte 0xff at offset 20\)"):
        read_text_file(path)
    with pytest.raises(UsageError, match="--pairings: .*gone.txt: no such file or folder"):
        read_text_file(tmp_path / "gone.txt", argument="--pairings")
    with pytest.raises(UsageError, match="is a folder, expected a file"):
        read_text_file(tmp_path)


def test_user_message_leaves_bugs_alone():
    assert user_message(ZeroDivisionError()) is None and user_message(AttributeError("x")) is None
    assert user_message(ValueError("x must be > 0")) == "x must be > 0"


def test_a_real_process_prints_no_traceback_unless_asked(tmp_path):
    bad = tmp_path / "pairs.txt"
    bad.write_bytes(b"Caf\xe9,has_crown_color::black\n")
    argv = [sys.executable, "-m", "concept_grounding.cli", "generate", "--out", str(tmp_path / "o"), "--tiny",
            "--pairings", str(bad)]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert "pairs.txt, line 1: not UTF-8 text" in plain.stderr
    debug = subprocess.run(argv + ["--debug"], capture_output=True, text=True, timeout=300)
    assert debug.returncode == 2 and "Traceback" in debug.stderr
