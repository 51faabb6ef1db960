"""curate exactly by SUB's rules (Sec. 4.3, App. E; docs/human_validation.md) on hand-made answers of
known outcome: a study-2 tie is no majority; S+ among its class's S- (known at plan time) is dropped without the world;
candidates whose S- is not the world's are curated as real ones, said in the report; bad
input is one line; images below k are counted and named."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from concept_grounding.curation.curate import answers_frame, candidates_frame, pairing_scores
from concept_grounding.curation.curate_inputs import CurateConfig
from concept_grounding.curation.curate_job import run_curate
from concept_grounding.curation.study_store import StudyStore
from concept_grounding.errors import UsageError

RED, BLUE, PINK = "has_crown_color::red", "has_crown_color::blue", "has_crown_color::pink"
CARD, JAY = "017.Cardinal", "073.Blue_Jay"


def _cands(removed_red=(RED,)) -> pd.DataFrame:
    """Two Cardinal pairings (S+ blue with S- red; S+ red with S- none) and one Jay pairing."""
    rows = [
        {
            "id": "c0",
            "file_name": "c0.png",
            "reference_class": CARD,
            "target_attribute": BLUE,
            "removed_attributes": list(removed_red),
        },
        {"id": "c1", "file_name": "c1.png", "reference_class": CARD, "target_attribute": RED, "removed_attributes": []},
        {
            "id": "c2",
            "file_name": "c2.png",
            "reference_class": JAY,
            "target_attribute": PINK,
            "removed_attributes": [BLUE],
        },
    ]
    return candidates_frame(rows)


def _study1(images=("c0", "c1", "c2"), annotators=3) -> list[tuple]:
    return [
        (f"a{i}", f"1:{c}", 1, q, "yes" if q == "q1" else "no")
        for c in images
        for i in range(annotators)
        for q in ("q1", "q2")
    ]


def test_a_study2_tie_is_no_majority():
    """6 of 12 pick S- (red) and 6 pick S+ (blue): no majority, so the pairing is not S+ = S-;
    7 of 12 picking red is one."""
    tie = [(f"a{i}", "2:c0", 2, "present", RED if i < 6 else BLUE) for i in range(12)]
    pairs = pairing_scores(answers_frame(_study1() + tie), _cands(removed_red=(RED,)))
    assert pd.isna(pairs.loc[(CARD, BLUE), "study2_majority"]) and pairs.loc[(CARD, BLUE), "reason"] == ""
    seven = [(a, im, s, q, RED if a in {f"a{i}" for i in range(7)} else BLUE) for a, im, s, q, _ in tie]
    pairs = pairing_scores(answers_frame(_study1() + seven), _cands())
    assert pairs.loc[(CARD, BLUE), "study2_majority"] == RED and pairs.loc[(CARD, BLUE), "reason"] == "S+ = S-"


def test_s_plus_among_its_class_s_minus_is_dropped_at_plan_time_without_the_world():
    """Cardinal's S- includes red (from its blue pairing), so the pairing with S+ red is S+ = S-
    before any study-2 answer; the Jay's pairing (S+ pink, S- blue) is kept."""
    pairs = pairing_scores(answers_frame(_study1()), _cands(), class_attributes=None)
    assert pairs["reason"].to_dict() == {(CARD, BLUE): "", (CARD, RED): "S+ = S-", (JAY, PINK): ""}


def test_refusals_study2_outside_the_group_and_q1_without_q2():
    outside = [("a0", "2:c1", 2, "present", "has_wing_color::red")]  # c1's pairing is dropped anyway
    with pytest.raises(ValueError, match="not an attribute of S\\+'s group \\(has_crown_color\\)"):
        pairing_scores(answers_frame(_study1() + outside), _cands())
    no_q2 = [r for r in _study1() if not (r[0] == "a1" and r[1] == "1:c2" and r[3] == "q2")]
    with pytest.raises(ValueError, match="'a1' answered only \\['q1'\\] of '1:c2'.*excessive-modification"):
        pairing_scores(answers_frame(no_q2), _cands())


def _folder(tmp_path: Path, rows: list[dict]) -> Path:
    folder = tmp_path / "cands"
    folder.mkdir(exist_ok=True)
    (folder / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _config(folder: Path, answers: Path, **kw) -> CurateConfig:
    return CurateConfig(folder, answers, write_images=False, **kw)


def test_bad_inputs_are_one_line(tmp_path):
    rows = [dict(r) for r in _cands().to_dict("records")]
    folder = _folder(tmp_path, rows)
    empty = tmp_path / "empty.parquet"
    pd.DataFrame(
        {
            c: pd.Series(dtype=t)
            for c, t in (("annotator", str), ("image", str), ("study", int), ("question", str), ("answer", str))
        }
    ).to_parquet(empty)
    store = StudyStore(tmp_path / "empty.db")
    store.close()
    for path in (empty, tmp_path / "empty.db"):
        with pytest.raises(UsageError, match="no answers") as err:
            run_curate(_config(folder, path, world_seed=None))
        assert "\n" not in str(err.value)
    answers = tmp_path / "a.parquet"
    answers_frame(_study1()).drop(columns="candidate").to_parquet(answers)
    bare = _folder(tmp_path, [{k: v for k, v in r.items() if k != "removed_attributes"} for r in rows])
    with pytest.raises(UsageError, match="lack removed_attributes"):
        run_curate(_config(bare, answers, world_seed=None))


def test_real_class_names_are_detected_and_images_below_k_reported(tmp_path):
    """Without --world-seed none, candidates whose S- are not the world's (real SUB's) are curated as
    real ones, not with the world's invented class attributes; the report says so, and names the
    images with fewer than k answers; the header counts the pairings actually kept."""
    rows = [dict(r) for r in _cands().to_dict("records")]
    folder = _folder(tmp_path, rows)
    answers = tmp_path / "a.parquet"
    two = [r for r in _study1() if not (r[1] == "1:c2" and r[0] == "a2")]  # c2: 2 of k = 3 annotators
    answers_frame(two).drop(columns="candidate").to_parquet(answers)
    auto, flagged = run_curate(_config(folder, answers)), run_curate(_config(folder, answers, world_seed=None))
    assert auto.world_note.startswith("not the bird world's candidates (seed 0)")
    assert auto.pairings["reason"].to_dict() == flagged.pairings["reason"].to_dict()
    assert sorted(auto.kept) == sorted(flagged.kept) == ["c0", "c2"]
    assert auto.below_k == {1: ["1:c2"]}
    report = (auto.save(tmp_path / "out")).read_text()
    assert "2 of 3 pairings" in report and "study 1: 1 (1:c2)" in report and "Not the bird world's" in report
