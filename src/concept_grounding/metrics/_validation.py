"""Input checks shared by the metric functions.

Every check raises ``ValueError`` naming the offending argument; nothing is broadcast
or cast silently (strings are not numbers, 1.7 is not a class id). Arrays may be numpy
arrays, (nested) lists or torch tensors; tensors are detached and copied to the CPU.

This is the one validation path of the metrics: the plain functions call these checks,
and the ``evaluate`` modules run the same checks on every ``add`` / ``add_batch`` /
``compute`` input through :func:`check_columns` (see :mod:`.module_inputs`) before
``evaluate`` casts the columns to its ``datasets.Features``.

>>> as_array([[0.1, 0.9]], "probabilities", ndim=2).shape
(1, 2)
>>> as_array([0.5, float("nan")], "scores")
Traceback (most recent call last):
...
ValueError: scores contains NaN or inf
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal

import numpy as np

__all__ = [
    "as_array",
    "as_names",
    "as_name_lists",
    "as_labels",
    "as_mask",
    "check_probabilities",
    "check_same_length",
    "check_choice",
    "check_positive_ints",
    "InputField",
    "check_columns",
]


def _to_numpy(x: Any, name: str) -> np.ndarray:
    """``x`` as a numpy array; ragged nesting raises ``ValueError`` naming ``name``."""
    if x is None:
        raise ValueError(f"{name} is required")
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} must be a numeric array of a regular shape: {err}") from None


def as_array(
    x: Any,
    name: str,
    *,
    ndim: int | None = None,
    dtype: type | None = np.float64,
    allow_empty: bool = False,
) -> np.ndarray:
    """Convert ``x`` to a finite float array with ``ndim`` dimensions.

    ``dtype=None`` keeps float32 input as float32 and converts anything else to float64.

    Raises ``ValueError`` (naming ``name``) on ragged input, the wrong number of
    dimensions, an empty array or NaN/inf values.
    """
    arr = _to_numpy(x, name)
    _check_numeric(arr, name)
    if dtype is None:
        dtype = np.float32 if arr.dtype == np.float32 else np.float64
    try:
        arr = arr.astype(dtype, copy=False)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} must be a numeric array of a regular shape: {err}") from None
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _check_numeric(arr: np.ndarray, name: str) -> None:
    """Raise unless ``arr`` holds numbers (bool, int, float); object arrays are checked per item."""
    if arr.dtype.kind in "biuf":
        return
    if arr.dtype.kind == "O" and all(isinstance(v, (bool, int, float, np.number)) for v in arr.ravel()):
        return
    raise ValueError(f"{name} must be numeric, got values of dtype {arr.dtype}")


def as_labels(x: Any, name: str, *, num_classes: int | None = None, ndim: int = 1) -> np.ndarray:
    """Integer labels in ``[0, num_classes)``; floats are accepted only if integral.

    >>> as_labels([0, 2.0], "predictions").tolist()
    [0, 2]
    >>> as_labels([0, 1.7], "predictions")
    Traceback (most recent call last):
    ...
    ValueError: predictions must hold integer labels, found 1.7
    """
    raw = _to_numpy(x, name)
    if np.issubdtype(raw.dtype, np.integer) and raw.ndim == ndim and raw.size:
        arr = raw.astype(np.int64, copy=False)
    else:
        raw = as_array(raw, name, ndim=ndim, dtype=np.float64)
        fractional = raw != np.round(raw)
        if fractional.any():
            raise ValueError(f"{name} must hold integer labels, found {raw[fractional][0]:g}")
        if np.abs(raw).max() >= 2.0**63:
            raise ValueError(f"{name} must hold int64 labels, found {np.abs(raw).max():g}")
        arr = raw.astype(np.int64)
    if arr.min() < 0:
        raise ValueError(f"{name} must be >= 0, found {arr.min()}")
    if num_classes is not None and arr.max() >= num_classes:
        raise ValueError(f"{name} must be < {num_classes}, found {arr.max()}")
    return arr


def as_mask(x: Any, name: str, *, ndim: int) -> np.ndarray:
    """A boolean array; numeric input must be 0/1."""
    raw = _to_numpy(x, name)
    if raw.dtype == bool:
        arr = raw
    else:
        num = as_array(raw, name, ndim=ndim)
        if not np.isin(num, (0.0, 1.0)).all():
            raise ValueError(f"{name} must be binary (0/1 or bool)")
        arr = num.astype(bool)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    return arr


def check_probabilities(arr: np.ndarray, name: str) -> np.ndarray:
    """Raise unless every entry lies in ``[0, 1]``."""
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must be probabilities in [0, 1], found range [{arr.min():g}, {arr.max():g}]")
    return arr


def check_same_length(**arrays: np.ndarray | Sequence[Any]) -> int:
    """Raise unless all arguments have the same first dimension; return it.

    >>> check_same_length(predictions=[1, 2], references=[1])
    Traceback (most recent call last):
    ...
    ValueError: predictions and references must have the same length, got 2 and 1
    """
    items = [(k, len(v)) for k, v in arrays.items() if v is not None]
    first_name, first_len = items[0]
    for name, n in items[1:]:
        if n != first_len:
            raise ValueError(f"{first_name} and {name} must have the same length, got {first_len} and {n}")
    return first_len


def check_choice(value: str, name: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_positive_ints(values: Sequence[int] | int, name: str, *, maximum: int | None = None) -> tuple[int, ...]:
    """A non-empty tuple of positive ints (``top_l``, ``alphas``), each <= ``maximum``."""
    vals = (values,) if isinstance(values, (int, np.integer)) else tuple(values)
    if not vals:
        raise ValueError(f"{name} is empty")
    for v in vals:
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must hold positive integers, got {v!r}")
        if maximum is not None and v > maximum:
            raise ValueError(f"{name} values must be <= {maximum}, got {v}")
    return tuple(int(v) for v in vals)


def as_names(x: Any, name: str) -> list[str]:
    """A non-empty list of strings (attribute or class names); nothing else is turned into text.

    >>> as_names(["017.Cardinal"], "reference_classes")
    ['017.Cardinal']
    >>> as_names([1.7], "target_attributes")
    Traceback (most recent call last):
    ...
    ValueError: target_attributes must hold strings, got float 1.7
    """
    if x is None:
        raise ValueError(f"{name} is required")
    if isinstance(x, str):
        raise ValueError(f"{name} must be a sequence of names, not a single string")
    out = list(x)
    if not out:
        raise ValueError(f"{name} is empty")
    _check_strings(out, name)
    return out


def as_name_lists(x: Any, name: str) -> list[list[str]]:
    """A non-empty list of lists of strings (one list per image, each possibly empty).

    >>> as_name_lists([["has_bill_shape::dagger"], []], "removed_attributes")
    [['has_bill_shape::dagger'], []]
    >>> as_name_lists(["has_bill_shape::dagger"], "removed_attributes")
    Traceback (most recent call last):
    ...
    ValueError: removed_attributes must be a list of lists of names (one list per image)
    """
    if x is None:
        raise ValueError(f"{name} is required")
    rows = [x] if isinstance(x, str) else list(x)
    if any(issubclass(t, (str, bytes)) or not hasattr(t, "__iter__") for t in set(map(type, rows))):
        raise ValueError(f"{name} must be a list of lists of names (one list per image)")
    out = [list(r) for r in rows]
    if not out:
        raise ValueError(f"{name} is empty")
    _check_strings(chain.from_iterable(out), name)
    return out


def _check_strings(values: Iterable[Any], name: str) -> None:
    """Raise unless every value is a ``str`` (one pass over the types, then the culprit)."""
    values = values if isinstance(values, list) else list(values)
    if all(issubclass(t, str) for t in set(map(type, values))):
        return
    bad = next(v for v in values if not isinstance(v, str))
    raise ValueError(f"{name} must hold strings, got {type(bad).__name__} {bad!r}")


@dataclass(frozen=True)
class InputField:
    """One input column of an ``evaluate`` module: what each row holds, checked as the
    plain functions check it, and the ``datasets`` feature it is stored as.

    Attributes:
        kind: ``"label"`` (class id: integer >= 0, :func:`as_labels`), ``"value"``
            (finite number, :func:`as_array`), ``"probability"`` (finite, in [0, 1]),
            ``"flag"`` (0/1 or bool, :func:`as_mask`), ``"name"`` (string) or
            ``"names"`` (list of strings).
        row_ndim: dimensions of one row (0: a scalar per row, 1: a vector, ...);
            numeric kinds only.
        dtype: storage type of numeric values (``"float64"``, ``"float32"``).

    >>> InputField("label").feature()
    Value('int64')
    >>> InputField("value", row_ndim=1).check([[0.5], [float("nan")]], "concept_scores")
    Traceback (most recent call last):
    ...
    ValueError: concept_scores contains NaN or inf
    """

    kind: Literal["label", "value", "probability", "flag", "name", "names"]
    row_ndim: int = 0
    dtype: str = "float64"

    def check(self, column: Any, name: str) -> np.ndarray | list[str] | list[list[str]]:
        """``column`` (one row per image) converted as the plain functions convert it:
        an int64 / float / bool array, or a list of names. Raises ``ValueError`` naming
        ``name`` when it is not valid."""
        ndim = 1 + self.row_ndim
        if self.kind == "label":
            return as_labels(column, name, ndim=ndim)
        if self.kind in ("value", "probability"):
            arr = as_array(column, name, ndim=ndim, dtype=np.dtype(self.dtype).type)
            return check_probabilities(arr, name) if self.kind == "probability" else arr
        if self.kind == "flag":
            return as_mask(column, name, ndim=ndim)
        if self.kind == "name":
            return as_names(column, name)
        return as_name_lists(column, name)

    def feature(self) -> Any:
        """The ``datasets`` feature that stores this column losslessly once checked."""
        import datasets

        if self.kind == "name":
            return datasets.Value("string")
        if self.kind == "names":
            return datasets.Sequence(datasets.Value("string"))
        value = {"label": "int64", "flag": "bool"}.get(self.kind, self.dtype)
        feature: Any = datasets.Value(value)
        for _ in range(self.row_ndim):
            feature = datasets.Sequence(feature)
        return feature


def check_columns(
    columns: Mapping[str, Any], fields: Mapping[str, InputField]
) -> dict[str, np.ndarray | list[str] | list[list[str]]]:
    """Check a batch of module inputs against ``fields``; return the converted columns.

    Every field must be given, nothing else may be, each column must pass its
    :meth:`InputField.check`, and all columns must have the same (non-zero) length.

    >>> fields = {"predictions": InputField("label"), "references": InputField("label")}
    >>> check_columns({"predictions": [0, 1.7], "references": [0, 1]}, fields)
    Traceback (most recent call last):
    ...
    ValueError: predictions must hold integer labels, found 1.7
    >>> check_columns({"predictions": [0, 1], "references": [0]}, fields)
    Traceback (most recent call last):
    ...
    ValueError: predictions and references must have the same length, got 2 and 1
    """
    unknown = [k for k, v in columns.items() if v is not None and k not in fields]
    if unknown:
        raise ValueError(f"unknown input(s) {unknown}; this module takes {list(fields)}")
    missing = [k for k in fields if columns.get(k) is None]
    if missing:
        raise ValueError(f"{missing[0]} is required (inputs: {list(fields)})")
    out = {name: field.check(columns[name], name) for name, field in fields.items()}
    check_same_length(**out)
    return out
