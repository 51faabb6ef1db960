"""The annotation app's SUB calls (:mod:`concept_grounding.curation.annotations`) over the study store: the same
images, answers, refusals and progress as the store's own calls (the store itself: test_study_store.py)."""

from __future__ import annotations

import pytest

from concept_grounding.curation.annotations import AnnotationError, AnnotationStore, study1_item, study2_item
from concept_grounding.curation.study_store import StudyStore

CHOICES = ("has_crown_color::pink", "has_crown_color::blue", "has_crown_color::black")


def _store(tmp_path, n=3, k=2) -> AnnotationStore:
    store = AnnotationStore(tmp_path / "a.db", k=k)
    store.add_images(
        [study1_item(f"1:c{i}", "017.Cardinal", CHOICES[0], candidate=f"c{i}") for i in range(n)]
        + [study2_item(f"2:c{i}", "017.Cardinal", CHOICES[0], CHOICES, candidate=f"c{i}") for i in range(n)]
    )
    return store


def test_the_apps_calls_are_the_study_stores(tmp_path):
    store = _store(tmp_path)
    item = store.next_image("ann", 1)
    assert item == study1_item("1:c0", "017.Cardinal", CHOICES[0], candidate="c0") == store.image("1:c0")
    assert store.open_image("ann", 1) == "1:c0" == store.open_record("ann", "sub-1")
    store.submit("ann", "1:c0", {"q1": "yes", "q2": "no"})
    store.submit("ann", "2:c1", {"present": CHOICES[2]})
    assert store.rows() == [
        ("ann", "1:c0", 1, "q1", "yes"),
        ("ann", "1:c0", 1, "q2", "no"),
        ("ann", "2:c1", 2, "present", CHOICES[2]),
    ]
    study = StudyStore(tmp_path / "a.db")
    assert [r.answers for r in study.responses("sub-1")] == [{"q1": "yes", "q2": "no"}]
    assert store.progress("ann", 1) == study.progress("ann", "sub-1") == (1, 3)
    assert store.complete(2) == study.complete("sub-2") == (0, 3) and len(store.images()) == 6
    assert [i.image for i in store.images(2)] == ["2:c0", "2:c1", "2:c2"]


@pytest.mark.parametrize(
    ("image", "answers", "words"),
    [
        ("1:forged", {"q1": "yes", "q2": "no"}, "forged"),
        ("1:c0", {"q1": "maybe", "q2": "no"}, "'maybe'"),
        ("1:c0", {"q1": "yes"}, "['q1', 'q2']"),
        ("2:c0", {"present": "has_wing_color::red"}, "not one of"),
    ],
)
def test_bad_input_one_line_nothing_written(tmp_path, image, answers, words):
    store = _store(tmp_path)
    with pytest.raises(AnnotationError) as err:
        store.submit("a", image, answers)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert store.rows() == []


def test_curate_reads_the_same_answers_from_the_export_and_from_its_parquet(tmp_path):
    import pandas as pd

    from concept_grounding.curation.curate import answers_frame

    store = _store(tmp_path, n=3, k=2)
    for name in ("ann", "bob"):
        while (item := store.next_image(name, 1)) is not None:
            store.submit(name, item.image, {"q1": "somewhat", "q2": "yes" if name == "ann" else "no"})
        store.submit(name, "2:c0", {"present": CHOICES[1]})
    columns = ["annotator", "image", "study", "question", "answer", "candidate"]
    by_rows = answers_frame(store.rows())[columns].sort_values(columns).values.tolist()
    assert len(by_rows) == 2 * 3 * 2 + 2
    assert answers_frame(store.export(("sub-1", "sub-2")))[columns].sort_values(columns).values.tolist() == by_rows
    parquet = pd.read_parquet(store.to_parquet(("sub-1", "sub-2"), tmp_path / "a.parquet"))
    assert answers_frame(parquet)[columns].sort_values(columns).values.tolist() == by_rows
