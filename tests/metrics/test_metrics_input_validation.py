"""One validation path: every metric rejects the same bad input with a
ValueError naming the argument, whether it comes through the plain function, the
``evaluate`` module's ``compute``, or streamed ``add_batch`` / ``add``. Before the
modules checked their inputs, ``evaluate`` cast them to the module's Features on the way
in: 1.7 became class 1, NaN labels failed with "cannot convert float NaN to integer",
inf with an OverflowError, ragged rows with numpy's message, and an empty module with an
AttributeError."""

import os

os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evaluate
import numpy as np
import pytest

from concept_grounding import load_vocabulary
from concept_grounding.metrics import (
    concept_confidence_deviation,
    concept_existence,
    concept_global_importance,
    concept_location,
    sub_accuracy,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _offline_at_repo_root(monkeypatch):
    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True, raising=False)
    monkeypatch.setattr(evaluate.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.chdir(ROOT)


@dataclass
class Spec:
    """A metric as its module sees it (``columns`` + compute-only ``kwargs``) and how to
    call the plain function on the same data."""

    module: str
    columns: dict[str, list]
    kwargs: dict[str, Any]
    call: Callable[[dict, dict], dict]
    arg: dict[str, str] = field(default_factory=dict)  # module column -> function argument
    float_col: str = "concept_scores"  # a column of finite floats
    label_col: str = "predictions"  # a column of class ids (or of names, for SUB)
    vector_col: str = "concept_scores"  # a column of equal-length vectors
    config: str | None = None

    def function_arg(self, column: str) -> str:
        return self.arg.get(column, column)


N, L, K = 4, 3, 2
THETA = [[2.0, 0.0], [1.0, 1.0], [0.0, 3.0]]
SCORES = [[1.0, 0.5, 0.2], [0.3, 1.0, 0.1], [0.2, 0.1, 1.0], [0.5, 0.5, 0.5]]
PRED, REF = [0, 1, 1, 0], [0, 1, 0, 0]
VOCAB = load_vocabulary()
DAGGER, CONE, NEEDLE = "has_bill_shape::dagger", "has_bill_shape::cone", "has_bill_shape::needle"

SPECS = {
    "concept_confidence_deviation": Spec(
        "concept_confidence_deviation",
        columns={"predictions": [[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.7, 0.3]], "references": [0, 1, 1, 0]},
        kwargs={"real_probabilities": [[0.8, 0.2], [0.3, 0.7]], "real_labels": [0, 1]},
        call=lambda c, k: concept_confidence_deviation(
            c["predictions"], c["references"], k["real_probabilities"], k["real_labels"]
        ),
        arg={"predictions": "generated_probabilities", "references": "generated_labels"},
        float_col="predictions",
        label_col="references",
        vector_col="predictions",
    ),
    "concept_global_importance": Spec(
        "concept_global_importance",
        columns={"predictions": PRED, "references": REF, "concept_scores": SCORES},
        kwargs={"theta": THETA, "class_attributes": [[1, 0], [1, 1], [0, 1]]},
        call=lambda c, k: concept_global_importance(
            k["theta"], k["class_attributes"], c["concept_scores"], c["predictions"], c["references"]
        ),
    ),
    "concept_existence": Spec(
        "concept_existence",
        columns={
            "predictions": PRED,
            "references": REF,
            "concept_scores": SCORES,
            "concept_labels": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]],
        },
        kwargs={"theta": THETA, "top_l": (1,)},
        call=lambda c, k: concept_existence(
            k["theta"], c["concept_scores"], c["predictions"], c["concept_labels"], c["references"], top_l=k["top_l"]
        ),
    ),
    "concept_location": Spec(
        "concept_location",
        columns={
            "predictions": PRED,
            "references": REF,
            "concept_scores": SCORES,
            "concept_maps": np.arange(N * L * 4, dtype=np.float32).reshape(N, L, 2, 2).tolist(),
            "part_xy": [[[0.0, 0.0], [3.0, 3.0]]] * N,
            "part_visible": [[True, True]] * N,
        },
        kwargs={"theta": THETA, "concept_parts": [[0], [1], [0]], "image_size": (4, 4), "alphas": (1,), "top_l": (1,)},
        call=lambda c, k: concept_location(
            c["concept_maps"],
            c["part_xy"],
            c["part_visible"],
            theta=k["theta"],
            concept_scores=c["concept_scores"],
            predictions=c["predictions"],
            references=c["references"],
            concept_parts=k["concept_parts"],
            image_size=k["image_size"],
            alphas=k["alphas"],
            top_l=k["top_l"],
        ),
    ),
    "sub_accuracy": Spec(
        "sub_accuracy",
        columns={
            "predictions": [[0.2, 0.9, 0.1], [0.7, 0.4, 0.3], [0.5, 0.5, 0.5], [0.1, 0.2, 0.9]],
            "target_attributes": [NEEDLE, NEEDLE, CONE, DAGGER],
            "removed_attributes": [[DAGGER], [DAGGER], [], [CONE]],
            "reference_classes": ["017.Cardinal", "073.Blue_Jay", "017.Cardinal", "073.Blue_Jay"],
        },
        kwargs={"concept_names": [DAGGER, NEEDLE, CONE]},
        call=lambda c, k: sub_accuracy(
            c["predictions"],
            c["target_attributes"],
            c["removed_attributes"],
            concept_names=k["concept_names"],
            reference_classes=c["reference_classes"],
        ),
        arg={"predictions": "scores"},
        float_col="predictions",
        label_col="target_attributes",
        vector_col="predictions",
    ),
}


def _replace(column: list, row: int, value: Any) -> list:
    out = [list(r) if isinstance(r, list) else r for r in column]
    out[row] = value
    return out


def _set_entry(column: list, row: int, value: float) -> list:
    """``column`` with the first entry of ``row`` (or the row itself, for scalars) set to ``value``."""
    r = column[row]
    return _replace(column, row, [value] + list(r[1:]) if isinstance(r, list) else value)


# case -> (corrupt(spec) -> (column, bad value), message pattern with {arg})
CASES: dict[str, tuple[Callable[[Spec], tuple[str, Any]], str]] = {
    "nan": (lambda s: (s.float_col, _set_entry(s.columns[s.float_col], 1, float("nan"))), r"{arg} contains NaN or inf"),
    "inf": (lambda s: (s.float_col, _set_entry(s.columns[s.float_col], 1, float("inf"))), r"{arg} contains NaN or inf"),
    "non_integer_label": (
        lambda s: (s.label_col, _replace(s.columns[s.label_col], 1, 1.7)),
        r"{arg} must hold (integer labels, found 1.7|strings, got float 1.7)",
    ),
    "nan_label": (
        lambda s: (s.label_col, _replace(s.columns[s.label_col], 1, float("nan"))),
        r"{arg} (contains NaN or inf|must hold strings, got float nan)",
    ),
    "string_label": (
        lambda s: (s.label_col, [1] * N if s.module == "sub_accuracy" else [str(v) for v in s.columns[s.label_col]]),
        r"{arg} must (be numeric|hold strings)",
    ),
    "ragged_rows": (
        lambda s: (s.vector_col, _replace(s.columns[s.vector_col], 2, s.columns[s.vector_col][2][:-1])),
        r"{arg} must be a numeric array of a regular shape",
    ),
    "extra_dimension": (
        lambda s: (s.vector_col, [[r] for r in s.columns[s.vector_col]]),
        r"{arg} must have 2 dimension",
    ),
    "mismatched_lengths": (
        lambda s: (s.label_col, s.columns[s.label_col][:-1]),
        r"{arg}.* must have the same length|and {arg} must have the same length",
    ),
}
PATHS = ("function", "compute", "add_batch")


def load(spec: Spec):
    return evaluate.load(str(ROOT / "metrics" / spec.module), spec.config, keep_in_memory=True)


def run(path: str, spec: Spec, columns: dict) -> Any:
    if path == "function":
        return spec.call(columns, spec.kwargs)
    metric = load(spec)
    if path == "compute":
        return metric.compute(**columns, **spec.kwargs)
    metric.add_batch(**columns)
    return metric.compute(**spec.kwargs)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("metric", sorted(SPECS))
def test_good_input_gives_the_same_result_on_every_path(metric, path):
    """The table's clean inputs pass every path (so each bad case below fails for its defect alone)."""
    spec = SPECS[metric]
    out = run(path, spec, spec.columns)
    want = spec.call(spec.columns, spec.kwargs)
    first = next(k for k, v in want.items() if isinstance(v, float))
    np.testing.assert_allclose(out[first], want[first], equal_nan=True)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("metric", sorted(SPECS))
def test_bad_input_raises_value_error_naming_the_argument(metric, case, path):
    spec = SPECS[metric]
    corrupt, pattern = CASES[case]
    column, bad = corrupt(spec)
    name = spec.function_arg(column) if path == "function" else column
    with pytest.raises(ValueError, match=pattern.format(arg=re.escape(name))):
        run(path, spec, {**spec.columns, column: bad})


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("metric", sorted(SPECS))
def test_empty_input_raises_value_error_naming_an_argument(metric, path):
    spec = SPECS[metric]
    names = [spec.function_arg(c) for c in spec.columns] if path == "function" else list(spec.columns)
    with pytest.raises(ValueError, match=rf"^({'|'.join(map(re.escape, names))}) is empty"):
        run(path, spec, {c: [] for c in spec.columns})


@pytest.mark.parametrize("metric", sorted(SPECS))
def test_compute_with_nothing_added_raises_value_error(metric):
    """evaluate itself raised AttributeError ('NoneType' object has no attribute 'getvalue')."""
    spec = SPECS[metric]
    with pytest.raises(ValueError, match=rf"^{next(iter(spec.columns))} is empty: nothing was added"):
        load(spec).compute(**spec.kwargs)


@pytest.mark.parametrize("metric", sorted(SPECS))
def test_add_checks_one_example(metric):
    spec = SPECS[metric]
    row = {
        ("prediction" if c == "predictions" else "reference" if c == "references" else c): v[0]
        for c, v in spec.columns.items()
    }
    metric_ = load(spec)
    label_key = {"predictions": "prediction", "references": "reference"}.get(spec.label_col, spec.label_col)
    with pytest.raises(ValueError, match=rf"{spec.label_col} must hold"):
        metric_.add(**{**row, label_key: 1.7})
    for i in range(N):  # good rows still go in one at a time
        metric_.add(
            **{k: spec.columns[{"prediction": "predictions", "reference": "references"}.get(k, k)][i] for k in row}
        )
    out = metric_.compute(**spec.kwargs)
    want = spec.call(spec.columns, spec.kwargs)
    first = next(k for k, v in want.items() if isinstance(v, float))
    np.testing.assert_allclose(out[first], want[first], equal_nan=True)
    # evaluate empties its cache after a compute: a second compute has nothing again (our record, not its writer)
    with pytest.raises(ValueError, match=rf"^{next(iter(spec.columns))} is empty: nothing was added"):
        metric_.compute(**spec.kwargs)


@pytest.mark.parametrize("metric", sorted(SPECS))
def test_rows_of_different_width_across_batches_name_the_column(metric):
    """Each batch is regular, but the second is one column narrower: caught at compute."""
    spec = SPECS[metric]
    metric_ = load(spec)
    metric_.add_batch(**{c: v[:2] for c, v in spec.columns.items()})
    narrow = {c: v[2:] for c, v in spec.columns.items()}
    narrow[spec.vector_col] = [r[:-1] for r in narrow[spec.vector_col]]
    metric_.add_batch(**narrow)
    with pytest.raises(ValueError, match=rf"{spec.vector_col} must be a numeric array of a regular shape"):
        metric_.compute(**spec.kwargs)


def test_labels_are_stored_exactly_once_checked():
    """Integral floats are fine and are stored as the same class ids (no rounding either way)."""
    spec = SPECS["concept_existence"]
    metric = load(spec)
    got = metric.compute(**{**spec.columns, "predictions": [0.0, 1.0, 1.0, 0.0]}, **spec.kwargs)
    want = spec.call(spec.columns, spec.kwargs)
    assert np.asarray(got["top_concepts"]).tolist() == np.asarray(want["top_concepts"]).tolist()


def test_unknown_and_missing_module_inputs_are_named():
    spec = SPECS["concept_existence"]
    with pytest.raises(ValueError, match=r"concept_labels is required"):
        load(spec).add_batch(**{c: v for c, v in spec.columns.items() if c != "concept_labels"})
    with pytest.raises(ValueError, match=r"unknown input\(s\) \['concept_maps'\]"):
        load(spec).add_batch(**spec.columns, concept_maps=[[[0.0]]] * N)


def test_probabilities_are_checked_when_added():
    spec = SPECS["sub_accuracy"]
    bad = _set_entry(spec.columns["predictions"], 0, 1.5)
    with pytest.raises(ValueError, match=r"predictions must be probabilities in \[0, 1\]"):
        load(spec).add_batch(**{**spec.columns, "predictions": bad})
    group = evaluate.load(str(ROOT / "metrics" / "sub_accuracy"), "group", keep_in_memory=True)
    group.add_batch(**{**spec.columns, "predictions": bad})  # similarities may exceed 1
