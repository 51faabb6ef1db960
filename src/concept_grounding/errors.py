"""The project's user-facing errors and the one place that turns exceptions into CLI messages.

A *user error* is a problem the person running the command can fix: a bad argument, a
missing or malformed file, a model that is not available. Raise :class:`UsageError`
(or a subclass) for it, naming the argument or file and saying what to do; the CLI
prints ``concept-grounding: error: <message>`` and exits with status 2.

>>> err = UsageError("must be a positive integer, got 0", argument="--steps")
>>> str(err)
'--steps: must be a positive integer, got 0'
>>> str(UsageError("not valid UTF-8 text", file="pairs.txt", line=3, hint="save it as UTF-8"))
'pairs.txt, line 3: not valid UTF-8 text; save it as UTF-8'

:func:`user_message` decides which exceptions count as user errors (see its docstring);
everything else is a bug and keeps its traceback behind ``--debug``.

A message that tells the user what to pass names the option with :func:`option`: the
Python keyword (``concept_names=``) from the Python API, the command-line flag
(``--concept-names``) when a command runs the same code inside :func:`options_as_flags`.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "UsageError",
    "ModelUnavailableError",
    "user_message",
    "raised_by_this_package",
    "internal_summary",
    "read_text_file",
    "suggest",
    "option",
    "options_as_flags",
]

_FLAGS: ContextVar[Mapping[str, str]] = ContextVar("concept_grounding_flags", default=MappingProxyType({}))
_NO_VALUE = object()


class UsageError(ValueError):
    """A user error: bad argument, file or environment.

    Args:
        message: what is wrong.
        argument: the command-line argument at fault (``"--steps"``), if any.
        file: the file at fault, if any (shown with ``line`` when given).
        line: 1-based line number inside ``file``.
        hint: what to do about it.
    """

    def __init__(
        self,
        message: str,
        *,
        argument: str | None = None,
        file: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.reason, self.argument, self.line, self.hint = message, argument, line, hint
        self.file = None if file is None else str(file)
        where = [argument] if argument else []
        if self.file is not None:
            where.append(self.file if line is None else f"{self.file}, line {line}")
        text = f"{': '.join(where)}: {message}" if where else message
        super().__init__(f"{text}; {hint}" if hint else text)


class ModelUnavailableError(UsageError):
    """A named model or dataset cannot be loaded: not a local folder, not cached, Hub unreachable."""


def option(name: str, value: Any = _NO_VALUE) -> str:
    """How a message names the option ``name`` (set to ``value``): as a Python keyword, or as
    the command line's flag inside :func:`options_as_flags`.

    >>> option("concept_names"), option("output", 0), option("normalize", False)
    ('concept_names=', 'output=0', 'normalize=False')
    >>> with options_as_flags({"concept_names": "--concept-names", "output": "--output",
    ...                        "normalize=False": "--no-normalize"}):
    ...     option("concept_names"), option("output", 0), option("normalize", False), option("tokenizer")
    ('--concept-names', '--output 0', '--no-normalize', 'tokenizer=')
    """
    keyword = f"{name}=" if value is _NO_VALUE else f"{name}={value!r}"
    flags = _FLAGS.get()
    if keyword in flags:
        return flags[keyword]
    if name in flags:
        return flags[name] if value is _NO_VALUE else f"{flags[name]} {value}"
    return keyword


def named(*names: str) -> str:
    """How an error's ``argument=`` names the settings ``names``: their flags inside
    :func:`options_as_flags` (a command running the code), else the Python keywords.

    >>> named("t_min", "t_max")
    't_min/t_max'
    >>> with options_as_flags({"t_min": "--t-min", "t_max": "--t-max"}):
    ...     named("t_min", "t_max")
    '--t-min/--t-max'
    """
    flags = _FLAGS.get()
    return "/".join(flags.get(name, name) for name in names)


@contextmanager
def options_as_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, :func:`option` spells a keyword (``"output"``) or a keyword with its
    value (``"normalize=False"``) as its flag in ``flags``; keywords not in it stay keywords."""
    token = _FLAGS.set(dict(flags))
    try:
        yield
    finally:
        _FLAGS.reset(token)


def suggest(value: str, known: Iterable[str], n: int = 3) -> str:
    """`` (did you mean 'a', 'b'?)`` with difflib's close matches (case-insensitive), or ``""``.

    >>> suggest("Blue Jey", ["Blue Jay", "Cardinal"])
    " (did you mean 'Blue Jay'?)"
    """
    lowered = {k.lower(): k for k in known}
    close = [lowered[m] for m in difflib.get_close_matches(value.lower(), list(lowered), n=n, cutoff=0.6)]
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def read_text_file(path: str | os.PathLike[str], argument: str | None = None) -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or non-UTF-8 file raises :class:`UsageError`
    naming the file (and the line of the first bad byte)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise UsageError(_os_reason(err), argument=argument, file=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise UsageError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})",
            argument=argument,
            file=path,
            line=line,
            hint="save the file as UTF-8",
        ) from None


#: errno of a write that found no room: the disk is full, or the user's quota is spent.
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
#: errno of a write the user can fix: no room, no permission, a read-only file system.
_WRITE_ERRNOS = _NO_SPACE | {errno.EACCES, errno.EPERM, errno.EROFS}
#: how a wrapped OS error prints its number: Python's "[Errno 28]", Rust's "(os error 28)".
_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\]|\(os error (\d+)\)")


def _errno_in(text: str) -> int | None:
    found = _ERRNO_TEXT.search(text)
    return int(found.group(1) or found.group(2)) if found else None


def _write_failure(exc: BaseException, target: str | None) -> str | None:
    """``"<path>: <reason>"`` when ``exc`` is a full disk or a permission error, also as
    libraries wrap it (``shutil.copytree``'s list of failed copies, safetensors' "(os error
    28)"); ``None`` otherwise. The path is the one written: a copy's destination (not its
    source), else the error's file, else ``target`` (the command's output)."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        _source, path, why = exc.args[0][0]
        code = _errno_in(str(why))
    elif isinstance(exc, OSError) and exc.errno is not None:
        code, path = exc.errno, (exc.filename2 if exc.errno in _NO_SPACE else None) or exc.filename
    else:
        code, path = _errno_in(str(exc)), None
    if code not in _WRITE_ERRNOS:
        return None
    reason = _os_reason(OSError(code, os.strerror(code)))
    where = path or target
    return f"{where}: {reason}" if where else reason


def _os_reason(err: OSError) -> str:
    if err.errno in _NO_SPACE:
        return "no space left on the device; free some space or write elsewhere"
    if isinstance(err, FileNotFoundError):
        return "no such file or folder"
    if isinstance(err, PermissionError):
        return "permission denied (check the file's permissions)"
    if isinstance(err, IsADirectoryError):
        return "is a folder, expected a file"
    if isinstance(err, NotADirectoryError):
        return "a parent of this path is not a folder"
    return err.strerror or str(err)


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def user_message(exc: BaseException, target: str | os.PathLike[str] | None = None) -> str | None:
    """The one-line message for an expected (user) error, or ``None`` for a bug.

    Expected: :class:`UsageError` and the loaders' format errors (they name file and
    line); a full disk or a permission error while writing, however a library wraps it,
    named by the path written (``target``, the command's output, when the error has none);
    ``OSError`` with a file name (missing, unreadable, a folder) and other
    ``OSError`` such as a model that cannot be loaded; ``UnicodeDecodeError`` (a text
    file that is not UTF-8; the readers in this package name the file themselves);
    ``ValueError`` raised by this package's validation (every public function names the argument; a
    ``ValueError`` from inside a library is a bug: :func:`raised_by_this_package`);
    a missing optional dependency; running out of (GPU) memory. Anything else
    (``TypeError``, ``KeyError``, ``ZeroDivisionError``, ...) is a bug.
    """
    if isinstance(exc, UsageError):
        return " ".join(str(exc).split())
    if isinstance(exc, UnicodeDecodeError):
        return _one_line(
            f"a file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8 "
            "(rerun with --debug to see where it was read)"
        )
    if isinstance(exc, ModuleNotFoundError) and exc.name and not exc.name.startswith("concept_grounding"):
        return (
            f"this needs the optional package {exc.name!r}, which is not installed: "
            f"pip install {exc.name.split('.')[0]}"
        )
    if type(exc).__name__ == "OutOfMemoryError" or isinstance(exc, MemoryError):
        return _one_line(f"out of memory ({exc}); lower --batch-size or the image size")
    written = _write_failure(exc, None if target is None else str(target))
    if written is not None:
        return _one_line(written)
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.filename}: {_os_reason(exc)}"
    if isinstance(exc, OSError) or (isinstance(exc, ValueError) and raised_by_this_package(exc)):
        return _one_line(str(exc) or type(exc).__name__)
    return None


_PACKAGE_DIR = Path(__file__).resolve().parent


def raised_by_this_package(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is in this package: a ``ValueError`` our validation raised
    (it names the argument) rather than one from deep inside a library (numpy's "all input arrays must have the same
    shape" when a caller skipped a check: a bug to report, not the user's mistake). An exception never raised (no
    traceback) counts as ours.

    >>> import numpy as np
    >>> try:
    ...     np.stack([np.zeros(2), np.zeros(3)])
    ... except ValueError as err:
    ...     raised_by_this_package(err)
    False
    >>> raised_by_this_package(ValueError("x"))
    True
    """
    tb = exc.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE_DIR)


def internal_summary(exc: BaseException, limit: int = 300) -> str:
    """One line naming a bug (an error :func:`user_message` does not call a user error): its type,
    its message (shortened to ``limit`` characters) and the innermost frame that raised it. The CLI
    prints it after ``internal error:``; the Space writes it to its log (the visitor sees a generic line).

    >>> try:
    ...     {}["missing"]
    ... except KeyError as err:
    ...     internal_summary(err).startswith("KeyError: 'missing' (at ")
    True
    """
    text = f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit]}"
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        text += f" (at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno} in {tb.tb_frame.f_code.co_name})"
    return text
