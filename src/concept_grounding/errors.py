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
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

__all__ = ["UsageError", "ModelUnavailableError", "user_message", "read_text_file", "suggest", "option",
           "options_as_flags"]

_FLAGS: ContextVar[Mapping[str, str]] = ContextVar("concept_grounding_flags", default={})
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
        raise UsageError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})", argument=argument,
                         file=path, line=line, hint="save the file as UTF-8") from None


def _os_reason(err: OSError) -> str:
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


def user_message(exc: BaseException) -> str | None:
    """The one-line message for an expected (user) error, or ``None`` for a bug.

    Expected: :class:`UsageError` and the loaders' format errors (they name file and
    line); ``OSError`` with a file name (missing, unreadable, a folder) and other
    ``OSError`` such as a model that cannot be loaded; ``UnicodeDecodeError`` (a text
    file that is not UTF-8; the readers in this package name the file themselves);
    ``ValueError`` raised by validation (every public function names the argument);
    a missing optional dependency; running out of (GPU) memory. Anything else
    (``TypeError``, ``KeyError``, ``ZeroDivisionError``, ...) is a bug.
    """
    if isinstance(exc, UsageError):
        return " ".join(str(exc).split())
    if isinstance(exc, UnicodeDecodeError):
        return _one_line(f"a file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8 "
                         "(rerun with --debug to see where it was read)")
    if isinstance(exc, ModuleNotFoundError) and exc.name and not exc.name.startswith("concept_grounding"):
        return f"this needs the optional package {exc.name!r}, which is not installed: pip install {exc.name.split('.')[0]}"
    if type(exc).__name__ == "OutOfMemoryError" or isinstance(exc, MemoryError):
        return _one_line(f"out of memory ({exc}); lower --batch-size or the image size")
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.filename}: {_os_reason(exc)}"
    if isinstance(exc, (ValueError, OSError)):
        return _one_line(str(exc) or type(exc).__name__)
    return None
