"""argparse ``type=`` validators shared by every command and every declared setting: bad values fail at parse time.

Each validator takes the argument's text and returns the parsed value or raises
``argparse.ArgumentTypeError`` with a sentence saying what is accepted; argparse adds
the argument's name (``argument --steps: must be an integer >= 1, got '0'``).

>>> positive_int("3"), unit_interval("0.5"), multiple_of(16)("64")
(3, 0.5, 64)
>>> positive_int("0")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be an integer >= 1, got '0'
>>> closed_unit_interval("nan")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be a number in [0, 1], got 'nan'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from pathlib import Path

from concept_grounding.errors import suggest

__all__ = [
    "int_at_least",
    "positive_int",
    "nonnegative_int",
    "finite_float",
    "nonnegative_float",
    "positive_float",
    "unit_interval",
    "closed_unit_interval",
    "float_range",
    "multiple_of",
    "positive_int_list",
    "world_clip_side",
    "optional_int",
    "existing_file",
    "existing_dir",
    "output_dir",
    "class_name",
    "attribute_name",
    "choice_of",
    "suggest",
]

_Error = argparse.ArgumentTypeError


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """Integers ``>= low`` (and ``<= high`` when given).

    >>> int_at_least(0, 65535)("99999")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer in [0, 65535], got '99999'
    """
    what = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _Error(f"must be {what}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise _Error(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = f"int_at_least_{low}" if high is None else f"int_in_{low}_{high}"
    return parse


positive_int = int_at_least(1)
positive_int.__name__ = "positive_int"
nonnegative_int = int_at_least(0)
nonnegative_int.__name__ = "nonnegative_int"


def _bound(value: float) -> str:
    """An interval end as the error message writes it: ``0.5``, ``-inf`` or ``inf``."""
    return f"{value:g}" if math.isfinite(value) else ("-inf" if value < 0 else "inf")


def float_range(
    low: float = -math.inf, high: float = math.inf, *, low_open: bool = False, high_open: bool = False
) -> Callable[[str], float]:
    """Finite floats in the interval from ``low`` to ``high`` (open ends as asked); NaN and inf are refused."""
    left = "(" if low_open or low == -math.inf else "["
    right = ")" if high_open or high == math.inf else "]"
    what = (
        "a finite number"
        if (low, high) == (-math.inf, math.inf)
        else f"a number in {left}{_bound(low)}, {_bound(high)}{right}"
    )

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _Error(f"must be {what}, got {text!r}") from None
        ok = (
            math.isfinite(value)
            and (value > low if low_open else value >= low)
            and (value < high if high_open else value <= high)
        )
        if not ok:
            raise _Error(f"must be {what}, got {text!r}")
        return value

    return parse


finite_float = float_range()
nonnegative_float = float_range(0.0)
positive_float = float_range(0.0, low_open=True)
#: (0, 1]: a fraction that keeps something
unit_interval = float_range(0.0, 1.0, low_open=True)
#: [0, 1]
closed_unit_interval = float_range(0.0, 1.0)


def multiple_of(step: int, low: int | None = None, why: str = "") -> Callable[[str], int]:
    """Positive integers divisible by ``step`` (and ``>= low``); ``why`` says which model needs it."""
    low = step if low is None else low
    reason = f" ({why})" if why else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or value % step:
            raise _Error(f"must be a multiple of {step} that is >= {low}{reason}, got {text!r}")
        return value

    parse.__name__ = f"multiple_of_{step}"
    return parse


#: a world image side that the tiny CLIPs cut into 8 x 8 patches (``explain``, ``covar``)
world_clip_side = multiple_of(8, low=32, why="world images are >= 32 px and the tiny CLIP cuts 8 x 8 patches")


def optional_int(text: str) -> int | None:
    """An integer, or ``none`` for no value (``--world-seed none``: not the bird world).

    >>> optional_int("3"), optional_int("None")
    (3, None)
    """
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise _Error(f"expected an integer or none, got {text!r}") from None


def positive_int_list(text: str) -> tuple[int, ...]:
    """Comma-separated positive integers (``--vae-blocks 32,64,128``).

    >>> positive_int_list("32, 64,128")
    (32, 64, 128)
    """
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise _Error(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise _Error(f"expected positive integers, got {text!r}")
    return values


def existing_file(text: str) -> Path:
    """A path to an existing file."""
    path = Path(text).expanduser()
    if not path.exists():
        raise _Error(f"no such file: {text!r}")
    if not path.is_file():
        raise _Error(f"not a file: {text!r}")
    return path


def output_dir(text: str) -> Path:
    """A folder to write into: it may exist (as a folder) or not; an existing file is refused."""
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise _Error(f"exists and is not a folder: {text!r}")
    if not text.strip():
        raise _Error("must name a folder, got an empty string")
    return path


def existing_dir(text: str) -> Path:
    """A path to an existing folder."""
    path = Path(text).expanduser()
    if not path.exists():
        raise _Error(f"no such folder: {text!r}")
    if not path.is_dir():
        raise _Error(f"not a folder: {text!r}")
    return path


def choice_of(known: Iterable[str], what: str) -> Callable[[str], str]:
    """One of ``known`` (exact); an unknown value names close matches."""
    known = tuple(known)

    def parse(text: str) -> str:
        if text not in known:
            raise _Error(f"unknown {what} {text!r}{suggest(text, known)}; known: {', '.join(known)}")
        return text

    parse.__name__ = what.replace(" ", "_")
    return parse


def class_name(text: str) -> str:
    """A CUB class as its folder name (``017.Cardinal``), plain name (``Cardinal``) or display name
    (``Blue Jay``, any case); returns the folder name."""
    from concept_grounding.vocabulary import class_display_name, load_vocabulary

    vocab = load_vocabulary()
    key = text.strip().lower().replace("_", " ")
    for folder in vocab.classes:
        if key in (folder.lower().replace("_", " "), class_display_name(folder).lower()):
            return folder
    names = [class_display_name(c) for c in vocab.classes] + list(vocab.classes)
    raise _Error(
        f"unknown CUB class {text!r}{suggest(text, names)}; classes are CUB folder names like "
        "'017.Cardinal' or names like 'Blue Jay'"
    )


def attribute_name(text: str) -> str:
    """One of the 312 CUB attribute names (``has_crown_color::black``)."""
    from concept_grounding.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    if vocab.is_attribute(text):
        return text
    raise _Error(
        f"unknown CUB attribute {text!r}{suggest(text, vocab.attributes)}; attributes look like "
        "'has_crown_color::black'"
    )
