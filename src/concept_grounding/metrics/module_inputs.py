"""Checked inputs for the ``evaluate`` modules in the repository's ``metrics/`` folder.

``evaluate``'s cast of every input column to the module's ``Features`` is lossy (``int(1.7)`` stores 1,
NaN in an integer column fails naming no argument), so each module declares its inputs once as
:class:`~._validation.InputField` objects and mixes in :class:`CheckedInputs`, which runs the plain
functions' checks before ``evaluate`` sees an input and builds the ``Features`` from the same
declaration. This file does not import ``evaluate`` (hence the mixin's ``type: ignore[misc]``: the type checker
cannot see the ``evaluate.Metric`` that follows it). A module's shape: docs/guide/metrics.md.
"""

from __future__ import annotations

from typing import Any

from ._validation import InputField, check_columns

__all__ = ["CheckedInputs", "InputField", "to_plain"]


def to_plain(value: Any) -> Any:
    """``value`` with every numpy array, numpy scalar and tuple turned into plain Python
    lists, numbers and strings, recursively, so that a result goes through ``json`` and
    ``evaluate.save(path, **result)`` as it is.

    >>> import numpy as np
    >>> to_plain({"per_image": np.array([[1.0, 0.5]]), "n": np.int64(3), "names": np.array(["a"])})
    {'per_image': [[1.0, 0.5]], 'n': 3, 'names': ['a']}
    """
    import numpy as np

    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


class CheckedInputs:
    """Mixin for ``evaluate.Metric`` subclasses (list it first): validate inputs before
    ``evaluate`` casts them. Subclasses implement :meth:`_input_fields`. Whether rows were added
    is its own record (``_rows_added``), not evaluate's private cache state."""

    def _input_fields(self) -> dict[str, InputField]:
        """The module's input columns (may depend on ``self.config_name``)."""
        raise NotImplementedError

    def _features(self) -> Any:
        """``datasets.Features`` built from :meth:`_input_fields`."""
        import datasets

        return datasets.Features({name: field.feature() for name, field in self._input_fields().items()})

    def _checked(self, **columns: Any) -> dict[str, Any]:
        """All stored rows, checked and converted (numpy arrays, lists of names)."""
        return check_columns(columns, self._input_fields())

    def add_batch(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> Any:
        """Check a batch (one row per image in every column), then store it."""
        check_columns({"predictions": predictions, "references": references, **kwargs}, self._input_fields())
        stored = super().add_batch(predictions=predictions, references=references, **kwargs)  # type: ignore[misc]
        self._rows_added = True
        return stored

    def add(self, *, prediction: Any = None, reference: Any = None, **kwargs: Any) -> Any:
        """Check one row, then store it."""
        row = {"predictions": prediction, "references": reference, **kwargs}
        check_columns({k: None if v is None else [v] for k, v in row.items()}, self._input_fields())
        stored = super().add(prediction=prediction, reference=reference, **kwargs)  # type: ignore[misc]
        self._rows_added = True
        return stored

    def compute(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> Any:
        """Check the inputs given here (``add_batch`` does, as ``evaluate`` routes them
        through it), refuse to compute on nothing, and return the result in plain Python
        types (:func:`to_plain`: lists, not numpy arrays), as ``evaluate.save`` needs."""
        fields = self._input_fields()
        given = {"predictions": predictions, "references": references, **kwargs}
        if not getattr(self, "_rows_added", False) and all(given.get(name) is None for name in fields):
            first = next(iter(fields))
            raise ValueError(
                f"{first} is empty: nothing was added; pass the inputs to compute() or call add() / add_batch() first"
            )
        try:
            result = super().compute(predictions=predictions, references=references, **kwargs)  # type: ignore[misc]
            return to_plain(result)
        finally:
            self._rows_added = False  # evaluate empties its cache after a compute
