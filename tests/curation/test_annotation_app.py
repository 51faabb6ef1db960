"""The one annotation app's handlers and page, without a server: any study through :class:`StudyHandlers` (two
annotators at once, a refusal keeps the record, a stale submit refused), the keys generated from the questions, the
page built for every declared study; plus the ``annotate`` / ``curate`` commands. The served app: test_study_app.py
and test_annotation_trust.py."""

from __future__ import annotations

import json
import logging

import pytest

from concept_grounding.curation.annotate_app import (
    KEYS,
    SHORTCUTS_JS,
    StudyHandlers,
    build_app,
    option_label,
    shortcut_keys,
)
from concept_grounding.curation.annotation_items import AnnotationError
from concept_grounding.curation.study import (
    CONCEPTBED_RATING,
    STUDIES,
    SUB_STUDY_1,
    SUB_STUDY_2,
    Question,
    Record,
    Study,
)
from concept_grounding.curation.study_store import StudyStore

CHOICES = ("has_crown_color::pink", "has_crown_color::blue")


def sub_records(n=4):
    meta = {"plus": "pink crown color", "reference": "017.Cardinal"}
    ones = [Record(f"1:c{i}", "sub-1", {"image": f"c{i}.png"}, metadata=meta) for i in range(n)]
    twos = [Record("2:c0", "sub-2", {"image": "c0.png"}, options={"present": CHOICES})]
    rating = [
        Record(
            "r0", "conceptbed-rating", {"image": "g0.png", "caption": "a photo of V*"}, metadata={"question": "Match?"}
        )
    ]
    return ones + twos + rating


@pytest.fixture
def store(tmp_path):
    s = StudyStore(tmp_path / "a.db", k=2)
    for study in STUDIES.values():
        s.add_records(study, [r for r in sub_records() if r.study == study.name])
    return s


def rows(store):
    """Every stored answer: (annotator, study, record, question, answer), sorted."""
    return sorted(
        (r.annotator, r.study, r.record, q, a)
        for s in STUDIES
        for r in store.responses(s)
        for q, a in r.answers.items()
    )


def test_two_annotators_at_once_finish_their_batches(store):
    h = StudyHandlers(store)
    views = {n: h.current(h.identify(store.issue_token(n)), SUB_STUDY_1) for n in ("ann", "bob")}
    q1, q2 = (q.text(views["ann"].record) for q in SUB_STUDY_1.questions)
    assert "pink crown color" in q1 and "Cardinal" in q2 and views["ann"].progress == "ann: 0 / 4 images"
    while any(v.record_id for v in views.values()):
        for n, v in views.items():
            if v.record_id:
                views[n] = h.submit(n, SUB_STUDY_1, v.record_id, {"q1": "yes", "q2": "somewhat"})
    assert len(rows(store)) == 2 * 4 * 2
    assert views["ann"].message.startswith("All done") and views["ann"].progress == "ann: 4 / 4 images"


def test_one_handlers_object_answers_every_study(store):
    h = StudyHandlers(store)
    two = h.current("ann", SUB_STUDY_2)
    assert two.record.options["present"] == CHOICES
    assert h.submit("ann", SUB_STUDY_2, two.record_id, {"present": CHOICES[1]}).message.startswith("All done")
    rate = h.current("ann", CONCEPTBED_RATING)
    assert h.submit("ann", CONCEPTBED_RATING, rate.record_id, {"rating": "4"}).record is None
    assert ("ann", "conceptbed-rating", "r0", "rating", "4") in rows(store)
    assert ("ann", "sub-2", "2:c0", "present", CHOICES[1]) in rows(store)


def test_refusal_keeps_the_record_and_says_why_in_one_line(store, caplog):
    h = StudyHandlers(store)
    first = h.current("ann", SUB_STUDY_1)
    again = h.submit("ann", SUB_STUDY_1, first.record_id, {"q1": "yes", "q2": None})
    assert again.record_id == first.record_id and again.message == "answer q2 first"
    with caplog.at_level(logging.WARNING, logger="concept_grounding.annotate"):
        forged = h.submit("ann", SUB_STUDY_1, "1:forged", {"q1": "yes", "q2": "no"})
        bad = h.submit("ann", SUB_STUDY_1, first.record_id, {"q1": "Z" * 10_000, "q2": "no"})
        extra = h.submit("ann", SUB_STUDY_1, first.record_id, {"q1": "yes", "q2": "no", "q9": "x"})
    assert forged.message.startswith("not stored") and forged.record_id == first.record_id
    assert "is not one of yes, somewhat, no" in bad.message and len(bad.message) < 300 and "\n" not in bad.message
    assert "asks no question 'q9'" in extra.message
    assert [r.getMessage() for r in caplog.records] == [
        "annotate: refused a sub-1 submit by 'ann': stale or repeated",
        "annotate: refused a sub-1 submit by 'ann': answer to q1 outside its choices",
        "annotate: refused a sub-1 submit by 'ann': unknown question",
    ]
    assert rows(store) == []


def test_a_double_submit_is_refused_the_first_answer_kept(store):
    h = StudyHandlers(store)
    first = h.current("ann", SUB_STUDY_1)
    after = h.submit("ann", SUB_STUDY_1, first.record_id, {"q1": "yes", "q2": "no"})
    again = h.submit("ann", SUB_STUDY_1, first.record_id, {"q1": "no", "q2": "yes"})
    assert again.message.startswith("not stored") and again.record_id == after.record_id != first.record_id
    assert rows(store) == [("ann", "sub-1", "1:c0", "q1", "yes"), ("ann", "sub-1", "1:c0", "q2", "no")]


def test_identity_is_the_token_holder_locally_and_the_login_on_a_space(store):
    local, space = StudyHandlers(store), StudyHandlers(store, spaces=True)
    token = store.issue_token("Ann ")
    assert local.identify(token) == "ann"
    for bad in (None, "", "ann", token + "x", {"token": token}, "x" * 10**6):
        with pytest.raises(AnnotationError, match="personal link"):
            local.identify(bad, oauth_username="ann")
    assert space.identify(token, oauth_username="HF-User") == "hf-user"
    with pytest.raises(AnnotationError, match="sign in with Hugging Face"):
        space.identify(token, oauth_username=None)


def test_keys_are_generated_from_the_questions():
    """Each question takes the next keys; a choice question (up to 15 attributes in SUB's groups) the rest."""
    assert shortcut_keys(SUB_STUDY_1) == {"q1": "123", "q2": "456"}
    assert shortcut_keys(SUB_STUDY_2) == {"present": KEYS} and shortcut_keys(CONCEPTBED_RATING) == {"rating": "12345"}
    three = Study("t", "T", "", (), (Question("a", "label", "A", ("x", "y")), Question("b", "rating", "B")))
    assert shortcut_keys(three) == {"a": "12", "b": "34567"}
    bad = Study("t", "T", "", (), (Question("a", "choice", "A"), Question("b", "rating", "B")))
    with pytest.raises(ValueError, match="must be the last"):
        shortcut_keys(bad)
    labels = [option_label(KEYS[i], f"has_crown_color::{c}") for i, c in enumerate(range(15))]
    assert len({lab.split(" · ")[0] for lab in labels}) == 15 and labels[9].startswith("a · ")
    for needle in ("cg-keys-", "cg-submit", "Enter", "input[type=radio]"):
        assert needle in SHORTCUTS_JS


def test_the_page_renders_every_declared_study_with_its_keys_and_ids(store):
    """One tab per study; each radio carries its keys, each submit the class Enter clicks; every event runs
    CONCURRENCY at once without Gradio's per-component processing or progress overlay, and the queue recomputes its
    monitoring summary once per 1,000 events."""
    pytest.importorskip("gradio")
    from concept_grounding.curation.annotate_app import CONCURRENCY

    app = build_app(store, list(STUDIES.values()), lambda record, name: f"/images/{name}")
    blocks = {b.get("props", {}).get("elem_id"): b["props"] for b in app.config["components"]}
    assert blocks["q1"]["elem_classes"] == ["cg-keys-123"] and blocks["q2"]["elem_classes"] == ["cg-keys-456"]
    assert blocks["rating"]["elem_classes"] == ["cg-keys-12345"] and blocks["present"]["elem_classes"] == [
        f"cg-keys-{KEYS}"
    ]
    assert [blocks[s]["elem_classes"] for s in ("submit", "submit2", "submit3")] == [["cg-submit"]] * 3
    assert {"image1", "image2", "image3", "references3", "caption3", "shown1", "shown3"} <= set(blocks)
    apis = sorted(
        d["api_name"] for d in app.config["dependencies"] if d.get("api_name", "").endswith(("_start", "_submit"))
    )
    assert apis == sorted(f"{s.replace('-', '_')}_{e}" for s in STUDIES for e in ("start", "submit"))
    fns = [fn for fn in app.fns.values() if fn.api_name and fn.api_name.endswith(("_start", "_submit"))]
    assert len(fns) == 6 and all(not fn.preprocess and not fn.postprocess for fn in fns)
    assert all(fn.concurrency_limit == CONCURRENCY and fn.show_progress == "hidden" for fn in app.fns.values())
    assert app._queue.ANAYLTICS_CACHE_FREQUENCY == 1000 and app._queue.ANALYTICS_MAX_EVENTS == 1000
    for bad in ([], [SUB_STUDY_1, SUB_STUDY_1]):
        with pytest.raises(ValueError, match="each once"):
            build_app(store, bad, lambda record, name: name)


def test_annotate_simulate_then_curate_commands(tmp_path, capsys):
    from concept_grounding.cli import main
    from concept_grounding.loaders import load_sub

    gen, db = tmp_path / "gen", tmp_path / "a.db"
    assert (
        main(
            [
                "annotate",
                "--candidates",
                str(gen),
                "--db",
                str(db),
                "--world-task",
                "--simulate",
                "1,1,1",
                "--export",
                str(tmp_path / "ann.parquet"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "curate",
                "--candidates",
                str(gen),
                "--annotations",
                str(db),
                "--out",
                str(tmp_path / "out"),
                "--truth",
                str(gen / "truth.jsonl"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Human s+/s- binary 100.0/100.0, group 100.0/100.0" in out
    assert main(["annotate", "--candidates", str(gen), "--db", str(db), "--status"]) == 0
    status = capsys.readouterr().out
    assert "study 1: " in status and "have their 3 annotators" in status and "sim0-1: study 1" in status
    assert "3 annotators answered so far" in status and " 1 images" not in status
    summary = json.loads((tmp_path / "out" / "curation.json").read_text())
    assert sum(not a["kept"] for a in summary["attributes"].values()) == 1
    assert len(load_sub(tmp_path / "out" / "dataset")) == summary["kept_images"]


def test_curate_command_bad_store_one_line(tmp_path, capsys):
    from concept_grounding.cli import main

    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "metadata.jsonl").write_text(
        json.dumps({"file_name": "x.png", "reference_class": "017.Cardinal", "target_attribute": CHOICES[0]}) + "\n"
    )
    (tmp_path / "bad.db").write_bytes(b"garbage" * 100)
    assert (
        main(
            [
                "curate",
                "--candidates",
                str(gen),
                "--annotations",
                str(tmp_path / "bad.db"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an annotation database" in err[0]
