"""The CLI's error boundary: user errors exit 2 in one line, bugs exit 1, --debug shows the traceback."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from pathlib import Path

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
    ("exc", "expected"),
    [
        (UsageError("must be >= 1", argument="--n", hint="try 2"), "--n: must be >= 1; try 2"),
        (FileNotFoundError(2, "No such file or directory", "/data/x.txt"), "/data/x.txt: no such file or folder"),
        (PermissionError(13, "Permission denied", "/data/y.txt"), "/data/y.txt: permission denied"),
        (IsADirectoryError(21, "Is a directory", "/data"), "/data: is a folder, expected a file"),
        (OSError("We couldn't connect to the Hub\n   to load this model"), "We couldn't connect to the Hub to load"),
        (ModuleNotFoundError("No module named 'gradio'", name="gradio"), "optional package 'gradio'"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "a file is not UTF-8 text"),
        # a full disk or a permission error names the path written, however it is wrapped
        (OSError(errno.ENOSPC, "No space left on device"), "x: no space left on the device"),
        (
            OSError(errno.ENOSPC, "No space left on device", "/src/a.py", None, "/out/a.py"),
            "/out/a.py: no space left on the device",
        ),
        (
            shutil.Error(
                [("/src/a.py", "/out/a.py", "[Errno 28] No space left on device: '/src/a.py' -> '/out/a.py'")]
            ),
            "/out/a.py: no space left on the device",
        ),
        (
            type("SafetensorError", (Exception,), {})(
                "Error while serializing: I/O error: No space left on device (os error 28)"
            ),
            "x: no space left on the device",
        ),
        (PermissionError(errno.EACCES, "Permission denied"), "x: permission denied"),
    ],
)
def test_expected_errors_print_one_line_and_exit_2(monkeypatch, capsys, exc, expected):
    _fail_with(monkeypatch, exc)
    assert main(["world", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("concept-grounding: error: ") and expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_value_error_raised_by_the_package_is_a_user_error(monkeypatch, capsys):
    """The package's own checks raise ``ValueError`` naming the argument: exit 2, one line."""
    from concept_grounding.tdg.timing import Spread

    monkeypatch.setattr(world_command, "run", lambda args: Spread.of([]))
    assert main(["world", "--out", "x"]) == 2
    assert capsys.readouterr().err.strip() == "concept-grounding: error: no values to summarise"


def test_a_value_error_from_inside_a_library_is_a_bug(monkeypatch, capsys):
    """numpy's "all input arrays must have the same shape" (a check the package skipped) is not the user's
    mistake: exit 1, the frame that raised it, and the hint to rerun with --debug."""
    import numpy as np

    monkeypatch.setattr(world_command, "run", lambda args: np.stack([np.zeros(2), np.zeros(3)]))
    assert main(["world", "--out", "x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("concept-grounding: internal error: ValueError: all input arrays must have the same shape")
    assert "rerun with --debug" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


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
    argv = [
        sys.executable,
        "-m",
        "concept_grounding.cli",
        "generate",
        "--out",
        str(tmp_path / "o"),
        "--tiny",
        "--pairings",
        str(bad),
    ]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert "pairs.txt, line 1: not UTF-8 text" in plain.stderr
    debug = subprocess.run(argv + ["--debug"], capture_output=True, text=True, timeout=300)
    assert debug.returncode == 2 and "Traceback" in debug.stderr


# --------------------------------------------------------------------- full disk
def _full_disk(monkeypatch, when=lambda path: True) -> None:
    """``Path.write_bytes`` as on a full disk where ``when(path)``: the file is created, then
    the write fails with ENOSPC (what left 0-byte ``.tmp-<pid>`` files behind)."""
    real = Path.write_bytes

    def write_bytes(self, data):
        if not when(self):
            return real(self, data)
        self.touch()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [
        line
        for line in err.splitlines()  # warnings are lines of their own
        if line.startswith("concept-grounding: ") and not line.startswith("concept-grounding: warning: ")
    ]
    assert len(lines) == 1 and lines[0].startswith("concept-grounding: error: ") and "Traceback" not in err, err
    return lines[0]


def test_generate_on_a_full_disk_names_the_file_and_a_resume_finds_no_temporary_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "gen"
    argv = [
        "generate",
        "--out",
        str(out),
        "--tiny",
        "--classes",
        "Cardinal",
        "--attributes",
        "has_crown_color::black",
        "--images-per-pairing",
        "1",
        "--steps",
        "1",
    ]
    with monkeypatch.context() as full:
        _full_disk(full, lambda path: ".png.tmp-" in path.name)
        assert main(argv) == 2
    line = _one_error(capsys)
    assert f"{out}/" in line and ".png: no space left on the device" in line and ".tmp-" not in line
    assert not list(out.rglob("*.tmp-*"))
    assert main(argv) == 0  # the resume
    assert (
        not list(out.rglob("*.tmp-*")) and len([p for p in out.rglob("*.png") if p.name != ".contact_sheet.png"]) == 1
    )


def test_bench_on_a_full_disk_is_a_user_error_naming_the_file(tmp_path, monkeypatch, capsys):
    _full_disk(monkeypatch)
    out = tmp_path / "bench"
    assert (
        main(["bench", "--out", str(out), "--classes", "017.Cardinal", "073.Blue_Jay", "--no-clip", "--no-posthoc"])
        == 2
    )
    assert f"{out / 'config.json'}: no space left on the device" in _one_error(capsys)
    assert not list(out.rglob("*.tmp-*"))


def test_publish_on_a_full_disk_names_the_copy_not_its_source(tmp_path, monkeypatch, capsys):
    def copyfile(src, dst, *, follow_symlinks=True):  # how shutil's sendfile copy reports a full disk
        raise OSError(errno.ENOSPC, "No space left on device", str(src), None, str(dst))

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    out = tmp_path / "hub"
    assert (
        main(
            [
                "publish",
                "--namespace",
                "cg-test",
                "--out",
                str(out),
                "--size",
                "32",
                "--train-per-class",
                "1",
                "--test-per-class",
                "1",
                "--classes",
                "017.Cardinal",
                "073.Blue_Jay",
            ]
        )
        == 2
    )
    line = _one_error(capsys)
    assert ": no space left on the device" in line and line.split("error: ")[1].startswith(str(out)), line
    assert str(Path(__file__).resolve().parents[1] / "metrics") not in line


def test_an_argument_error_is_one_line_without_the_usage_block(capsys):
    """Argparse printed 8-17 lines of usage before the one-line error the manual
    shows; the error is now the only line, with where to find the usage."""
    from concept_grounding.cli import build_parser

    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["generate", "--max-images", "many"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("concept-grounding: error: generate: argument --max-images") and err.rstrip().endswith(
        "(see concept-grounding generate --help)"
    )


def test_a_folder_that_is_not_cub_and_a_missing_model_folder_say_so(tmp_path, capsys):
    """``bench --cub-root docs`` listed ten missing files instead of saying it is
    not a CUB_200_2011 folder (naming --cub-root); ``analyse --model /nonexistent`` said
    "expected file.py:factory" instead of "no such folder"."""
    not_cub = tmp_path / "docs"
    not_cub.mkdir()
    (not_cub / "notes.md").write_text("# not a dataset\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert main(["bench", "--cub-root", str(not_cub), "--sub", str(sub), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "not a CUB_200_2011 folder (--cub-root)" in err and "missing file" not in err, err
    missing = str(tmp_path / "nonexistent")
    assert main(["analyse", "--model", missing, "--cub-root", str(not_cub), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"concept-grounding: error: --model: no such folder or file {missing!r}; pass an existing folder or a "
        "Hub model id like 'org/name'"
    )  # the one resolver's line, the same from every command


def test_a_warning_reaches_the_user_as_one_line_without_a_source_path(monkeypatch, tmp_path, capsys):
    """A raw ``UserWarning`` with the path and line of the source that raised it
    reached the user; the command line shows it as one line (``--debug`` keeps Python's form)."""
    import warnings

    def run(args):
        warnings.warn("3 of 8 pairings have no guide bird;\n they are skipped", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(world_command, "run", run)
    assert main(["world", "--out", str(tmp_path / "w")]) == 0
    err = capsys.readouterr().err
    assert err == "concept-grounding: warning: 3 of 8 pairings have no guide bird; they are skipped\n", err


def test_generate_steps_default_to_the_model_s_own():
    """``generate`` ran the world Flux at 28 steps where its card says 20; the
    default is the model's own, and ``--steps`` still wins."""
    from concept_grounding.cli import build_parser
    from concept_grounding.commands.generate import config_from_args
    from concept_grounding.tdg.sources import DEFAULT_STEPS, FluxModel
    from concept_grounding.worldflux.loader import WORLD_STEPS

    def steps(*argv: str) -> int:
        config = config_from_args(build_parser().parse_args(["generate", "--out", "x", *argv]))
        # a named model is not resolved here (that probes the Hub): its FluxModel's default applies
        model = FluxModel("m", "float32", 1024, 512, load=lambda: None) if "--model" in argv else config.model.resolve()
        return config.resolved_steps(model)

    assert WORLD_STEPS == 20 and steps() == 20 and steps("--steps", "7") == 7
    assert DEFAULT_STEPS == 28 and steps("--model", "black-forest-labs/FLUX.1-dev") == 28


def test_the_manual_s_error_example_is_what_the_command_prints(capsys):
    """The manual (docs/guide/errors.md) promises one line; its example is the command's whole stderr."""
    import re
    import shlex

    text = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "errors.md").read_text()
    command, shown = re.search(r"```text\n\$ (concept-grounding generate[^\n]*)\n([^\n]*)\n```", text).groups()
    assert main(shlex.split(command)[1:]) == 2
    assert capsys.readouterr().err == shown + "\n"


# --- one error boundary for the command line and the Space ---------------------------------------


def _space_handler(api_name: str, policy=None):
    """The Space's handler of ``api_name`` as Gradio calls it (wrapped by the Space's boundary)."""
    pytest.importorskip("gradio")
    from concept_grounding.space import build_demo
    from concept_grounding.space.resources import ResourceStore

    demo = build_demo(store=ResourceStore(policy=policy))
    return next(fn.fn for fn in demo.fns.values() if fn.api_name == api_name)


def _page_error(handler, *args) -> str:
    import gradio as gr

    def call() -> None:
        result = handler(*args)
        if hasattr(result, "__next__"):
            list(result)

    with pytest.raises(gr.Error) as caught:
        call()
    return caught.value.message


def test_a_model_that_cannot_be_loaded_reads_the_same_in_the_cli_and_the_space(monkeypatch, capsys, tmp_path):
    """The Space judged errors apart from the CLI (its Explain tab wrapped them in its own
    words; a library error elsewhere read "Something went wrong"). The same model name, not in the
    cache and offline, now gives the same line in both: the CLI's after ``error:``, the page's whole."""
    from concept_grounding.space.policy import ModelPolicy

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    name = "nobody/no-such-clip"
    assert main(["explain", "--model", name, "--out", str(tmp_path / "out")]) == 2
    cli = capsys.readouterr().err.strip()
    assert cli.startswith("concept-grounding: error: --model: model 'nobody/no-such-clip' is not in the local")
    explain = _space_handler("explain", ModelPolicy(clip_models=(name,)))
    page = _page_error(explain, None, 0, "a bird", 3, [], name)
    assert page == cli.removeprefix("concept-grounding: error: ")


def test_the_space_classifies_errors_as_the_cli_does(caplog):
    """The Space's boundary is the CLI's (``errors.user_message``): a library's validation
    error, a missing file and a usage error read as the CLI prints them (server paths cut to their last
    part); a bug reads as a generic line in the page and one line, no traceback, in the log."""
    import logging

    from concept_grounding.errors import UsageError, user_message
    from concept_grounding.space.guard import INTERNAL_ERROR, page_message

    for exc in (
        ValueError("num_clusters must be >= 2, got 1"),
        UsageError("must be >= 1, got 0", argument="--steps"),
        FileNotFoundError(2, "No such file or directory", "notes.csv"),
    ):
        assert page_message(exc) == user_message(exc)
    assert (
        page_message(FileNotFoundError(2, "No such file", "/srv/space/data/notes.csv"))
        == "notes.csv: no such file or folder"
    )
    with caplog.at_level(logging.ERROR, logger="concept_grounding.space.guard"):
        try:
            {}["missing"]
        except KeyError as bug:
            assert page_message(bug, "explain") == INTERNAL_ERROR  # noqa: PT017 - called where the Space calls it
    (record,) = caplog.records
    assert record.getMessage().startswith("space: explain failed: KeyError: 'missing' (at test_cli_errors.py:")
    assert record.exc_info is None and "\n" not in record.getMessage()


def test_a_deprecated_spelling_warns_in_one_line(capsys):
    """``analyse --size`` is the old spelling of the model's input side, ``--image-size`` (as in ``sub``)."""
    assert main(["analyse", "--size", "7", "--out", "x"]) == 2  # parses (and warns) before refusing the size
    err = capsys.readouterr().err
    assert "concept-grounding: warning: --size is a deprecated spelling of --image-size; use --image-size" in err
