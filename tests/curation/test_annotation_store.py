"""SUB's studies 1-2 (App. E) on the study store: the sampled images as records and back, answers and refusals per
study, and curate reading the same answers from the export and its Parquet (the store itself: test_study_store.py)."""

from __future__ import annotations

import pytest

from concept_grounding.curation.annotation_items import AnnotationError, study1_item, study2_item
from concept_grounding.curation.study import image_item, sub_records
from concept_grounding.curation.study_store import StudyStore

CHOICES = ("has_crown_color::pink", "has_crown_color::blue", "has_crown_color::black")
SUB = ("sub-1", "sub-2")


def _items(n: int) -> list:
    return [study1_item(f"1:c{i}", "017.Cardinal", CHOICES[0], candidate=f"c{i}") for i in range(n)] + [
        study2_item(f"2:c{i}", "017.Cardinal", CHOICES[0], CHOICES, candidate=f"c{i}") for i in range(n)
    ]


def _store(tmp_path, n=3, k=2) -> StudyStore:
    store = StudyStore(tmp_path / "a.db", k=k)
    assert sum(store.add_records(s, records) for s, records in sub_records(_items(n)).items()) == 2 * n
    return store


def test_sub_images_are_records_and_answers_are_responses(tmp_path):
    store = _store(tmp_path)
    record = store.next_record("ann", "sub-1")
    assert image_item(record) == study1_item("1:c0", "017.Cardinal", CHOICES[0], candidate="c0")
    assert record.fields == {"image": "c0"} and store.open_record("ann", "sub-1") == "1:c0"
    store.submit("ann", "sub-1", "1:c0", {"q1": "yes", "q2": "no"})
    store.submit("ann", "sub-2", "2:c1", {"present": CHOICES[2]})
    assert [(r.annotator, r.record, r.answers) for s in SUB for r in store.responses(s)] == [
        ("ann", "1:c0", {"q1": "yes", "q2": "no"}),
        ("ann", "2:c1", {"present": CHOICES[2]}),
    ]
    again = StudyStore(tmp_path / "a.db")
    assert again.progress("ann", "sub-1") == store.progress("ann", "sub-1") == (1, 3)
    assert again.complete("sub-2") == (0, 3) and sum(len(again.records(s)) for s in SUB) == 6
    assert [r.id for r in again.records("sub-2")] == ["2:c0", "2:c1", "2:c2"]
    assert [image_item(r) for s in SUB for r in again.records(s)] == _items(3)


@pytest.mark.parametrize(
    ("study", "image", "answers", "words"),
    [
        ("sub-1", "1:forged", {"q1": "yes", "q2": "no"}, "forged"),
        ("sub-1", "2:c0", {"q1": "yes", "q2": "no"}, "not in sub-1"),
        ("sub-1", "1:c0", {"q1": "maybe", "q2": "no"}, "'maybe'"),
        ("sub-1", "1:c0", {"q1": "yes"}, "answer q2 before submitting"),
        ("sub-2", "2:c0", {"present": "has_wing_color::red"}, "not one of"),
        ("sub-2", "2:c0", {"present": CHOICES[0], "q1": "yes"}, "asks no question 'q1'"),
    ],
)
def test_bad_input_one_line_nothing_written(tmp_path, study, image, answers, words):
    store = _store(tmp_path)
    with pytest.raises(AnnotationError) as err:
        store.submit("a", study, image, answers)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert store.response_count() == 0


def test_curate_reads_the_same_answers_from_the_export_and_from_its_parquet(tmp_path):
    import pandas as pd

    from concept_grounding.curation.curate import answers_frame

    store = _store(tmp_path, n=3, k=2)
    for name in ("ann", "bob"):
        while (record := store.next_record(name, "sub-1")) is not None:
            store.submit(name, "sub-1", record.id, {"q1": "somewhat", "q2": "yes" if name == "ann" else "no"})
        store.submit(name, "sub-2", "2:c0", {"present": CHOICES[1]})
    columns = ["annotator", "image", "study", "question", "answer", "candidate"]
    expected = sorted(
        [name, f"1:c{i}", 1, q, a, f"c{i}"]
        for name, no in (("ann", "yes"), ("bob", "no"))
        for i in range(3)
        for q, a in (("q1", "somewhat"), ("q2", no))
    ) + [["ann", "2:c0", 2, "present", CHOICES[1], "c0"], ["bob", "2:c0", 2, "present", CHOICES[1], "c0"]]
    by_export = answers_frame(store.export(SUB))[columns].sort_values(columns).values.tolist()
    assert len(by_export) == 2 * 3 * 2 + 2 and by_export == sorted(expected)
    parquet = pd.read_parquet(store.to_parquet(SUB, tmp_path / "a.parquet"))
    assert answers_frame(parquet)[columns].sort_values(columns).values.tolist() == by_export
