"""Exceptions raised by the CUB and SUB loaders.

Every error names the file (and, where it applies, the 1-based line) at fault, so that
a broken download can be fixed by looking at one place:

>>> err = CUBFormatError("expected 2 columns, found 3", file="images.txt", line=7)
>>> str(err)
'images.txt, line 7: expected 2 columns, found 3'
>>> isinstance(err, UsageError), isinstance(err, ValueError), err.line
(True, True, 7)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError

__all__ = ["DatasetFormatError", "CUBFormatError", "SUBFormatError", "HubUnavailableError", "DatasetWarning"]


class DatasetFormatError(UsageError):
    """A dataset on disk is missing files or has malformed content: a :class:`~concept_grounding.errors.UsageError`
    naming the file (and line), with its message.

    Attributes:
        file: the offending file (or folder), or ``None`` when no single file is at fault.
        line: 1-based line number inside ``file``, or ``None``.
        reason: the message without the file and line.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, line: int | None = None) -> None:
        super().__init__(message, file=file, line=line)


class CUBFormatError(DatasetFormatError):
    """A CUB_200_2011 folder is incomplete or one of its files is malformed."""


class SUBFormatError(DatasetFormatError):
    """A SUB-style source lacks a needed column or holds values we cannot map."""


class DatasetWarning(UserWarning):
    """A loader repaired values a real, slightly messy copy has (a part centre a few pixels past
    its image, a stray extra field); one warning per kind and file counts them."""


def warn_repaired(file: str | Path, lines: list[int], what: str) -> None:
    """One :class:`DatasetWarning` ``"<file>: <n> <what>, e.g. line(s) [...]"`` for the repaired ``lines``.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_repaired("parts/part_locs.txt", [7, 3], "visible part centre(s) past the image clipped to its border")
    >>> str(seen[0].message)
    'parts/part_locs.txt: 2 visible part centre(s) past the image clipped to its border, e.g. line(s) [3, 7]'
    """
    import warnings

    shown = sorted(int(n) for n in lines)[:5]
    warnings.warn(f"{file}: {len(lines)} {what}, e.g. line(s) {shown}", DatasetWarning, stacklevel=3)


class HubUnavailableError(ConnectionError):
    """The Hugging Face Hub cannot be reached (offline mode, no network, or no access)."""
