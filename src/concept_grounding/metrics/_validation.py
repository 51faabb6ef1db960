"""Input checks shared by the metric functions.

Every check raises ``ValueError`` naming the offending argument; nothing is broadcast
silently. Arrays may be numpy arrays, (nested) lists or torch tensors; tensors are
detached and copied to the CPU.

>>> as_array([[0.1, 0.9]], "probabilities", ndim=2).shape
(1, 2)
>>> as_array([0.5, float("nan")], "scores")
Traceback (most recent call last):
...
ValueError: scores contains NaN or inf
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "as_array",
    "as_labels",
    "as_mask",
    "check_probabilities",
    "check_same_length",
    "check_choice",
    "check_positive_ints",
]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu().numpy()
    return np.asarray(x)


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
    if x is None:
        raise ValueError(f"{name} is required")
    try:
        arr = _to_numpy(x)
        if dtype is None:
            dtype = np.float32 if arr.dtype == np.float32 else np.float64
        arr = arr.astype(dtype, copy=False)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} must be a numeric array of a regular shape: {err}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def as_labels(x: Any, name: str, *, num_classes: int | None = None, ndim: int = 1) -> np.ndarray:
    """Integer labels in ``[0, num_classes)``; floats are accepted only if integral."""
    raw = _to_numpy(x)
    if np.issubdtype(raw.dtype, np.integer) and raw.ndim == ndim and raw.size:
        arr = raw.astype(np.int64, copy=False)
    else:
        raw = as_array(raw, name, ndim=ndim, dtype=np.float64)
        if not np.all(raw == np.round(raw)):
            raise ValueError(f"{name} must hold integer labels")
        arr = raw.astype(np.int64)
    if arr.min() < 0:
        raise ValueError(f"{name} must be >= 0, found {arr.min()}")
    if num_classes is not None and arr.max() >= num_classes:
        raise ValueError(f"{name} must be < {num_classes}, found {arr.max()}")
    return arr


def as_mask(x: Any, name: str, *, ndim: int) -> np.ndarray:
    """A boolean array; numeric input must be 0/1."""
    raw = _to_numpy(x)
    if raw.dtype == bool:
        arr = raw
    else:
        num = as_array(raw, name, ndim=ndim)
        if not np.isin(num, (0.0, 1.0)).all():
            raise ValueError(f"{name} must be binary (0/1 or bool)")
        arr = num.astype(bool)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def check_probabilities(arr: np.ndarray, name: str) -> np.ndarray:
    """Raise unless every entry lies in ``[0, 1]``."""
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must be probabilities in [0, 1], found range [{arr.min():g}, {arr.max():g}]")
    return arr


def check_same_length(**arrays: np.ndarray | Sequence) -> int:
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
