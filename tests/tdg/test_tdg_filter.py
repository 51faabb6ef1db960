"""SUB's VQA filter (Sec. 4.2): the pure selection rule with known answers, and the scorers."""

import numpy as np
import pytest

from concept_grounding import load_vocabulary
from concept_grounding.tdg.filter import (
    filter_records,
    group_options,
    keep_count,
    select_pairing,
    vqa_question,
    write_filter_report,
)
from concept_grounding.tdg.filter_scorers import AttributeJudgeScorer, tiny_clip_scorer

VOCAB = load_vocabulary()


def test_question_format():
    options = group_options("bill_shape")
    assert options[-1] == "Other" and "curved (up or down)" in options
    q = vqa_question("bill_shape", options)
    assert q.startswith(
        "What type of bill shape does this bird have? Please pick between A) curved (up or down) B) dagger"
    )
    assert q.endswith("J) Other")


def test_keep_count_paper_numbers():
    assert keep_count(500) == 50 and keep_count(10) == 1 and keep_count(25) == 3


def test_select_discards_wrong_ranks_and_keeps_top_fraction():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=20)
    probs[:, 0] = 0.0
    # 5 correct images (target 1) with known probabilities; the rest answer 2
    correct = {3: 0.90, 7: 0.95, 11: 0.60, 12: 0.95, 19: 0.80}
    for i in range(20):
        probs[i] = [0.0, 0.1, 0.9]
    for i, p in correct.items():
        probs[i] = [0.0, p, 1 - p]
    assert select_pairing(probs, 1).tolist() == [7, 12]  # keep 2 of 20; tie 0.95 broken by index
    assert select_pairing(probs, 1, keep_fraction=0.25).tolist() == [7, 12, 3, 19, 11]
    assert select_pairing(probs, 1, keep_fraction=0.3).tolist() == []  # 5 correct < 6 needed: dropped
    with pytest.raises(ValueError, match="0 <= target < K"):
        select_pairing(probs, 3)


def test_filter_records_report_counts(tmp_path):
    records = [{"reference_class": "073.Blue_Jay", "target_attribute": "has_eye_color::red", "i": i} for i in range(10)]
    records += [
        {"reference_class": "017.Cardinal", "target_attribute": "has_eye_color::red", "i": i} for i in range(10)
    ]
    red = group_options("eye_color").index("red")

    def probs_for(rows, question, options):
        assert question.startswith("What type of eye color")
        p = np.full((len(rows), len(options)), 0.01)
        for k, r in enumerate(rows):
            right = r["reference_class"] == "073.Blue_Jay" and r["i"] < 4
            p[k, red if right else 0] = 0.5 + 0.01 * r["i"]
        return p

    result = filter_records(records, probs_for, keep_fraction=0.2)
    assert [r["i"] for r in result.kept] == [3, 2]
    pairings = {p["reference_class"]: p for p in result.report["pairings"]}
    assert pairings["073.Blue_Jay"] == {
        "reference_class": "073.Blue_Jay",
        "target_attribute": "has_eye_color::red",
        "generated": 10,
        "correct": 4,
        "kept": 2,
        "dropped": False,
    }
    assert pairings["017.Cardinal"]["dropped"] and pairings["017.Cardinal"]["kept"] == 0
    assert result.report["kept_per_attribute"] == {"has_eye_color::red": 2}
    _, md_path = write_filter_report(result.report, tmp_path)
    assert "| 073.Blue_Jay | has_eye_color::red | 10 | 4 | 2 |" in md_path.read_text()


def test_attribute_oracle_scorer_known_answer():
    group = "tail_pattern"
    idx = VOCAB.groups[group]

    def predict(images):
        p = np.zeros((len(images), 312))
        p[:, idx[0]] = 0.5  # solid
        p[:, idx[2]] = 0.5  # striped
        return p

    probs = AttributeJudgeScorer(predict).score([None], "q", group_options(group), group)
    # scores [0.5, 0, 0.5, 0, other = 0.25] / 1.25
    np.testing.assert_allclose(probs, [[0.4, 0.0, 0.4, 0.0, 0.2]])


def test_tiny_clip_scorer_probabilities():
    from PIL import Image

    scorer = tiny_clip_scorer()
    images = [Image.new("RGB", (32, 32), c) for c in ("red", "blue")]
    options = group_options("wing_color")
    probs = scorer.score(images, vqa_question("wing_color", options), options, "wing_color")
    assert probs.shape == (2, len(options))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert not np.allclose(probs[0], probs[1])


def _image_folder(root, n=4):
    import json

    from PIL import Image

    root.mkdir()
    rows = []
    for i in range(n):
        Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(root / f"{i}.png")
        rows.append(
            {"file_name": f"{i}.png", "reference_class": "017.Cardinal", "target_attribute": "has_eye_color::red"}
        )
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.mark.parametrize("fraction", ["0", "1.5", "nan", "-0.1"])
def test_cli_keep_fraction_is_checked_before_any_image_is_scored(tmp_path, monkeypatch, capsys, fraction):
    """The old command scored every image, then failed in keep_count."""
    import sys
    import types

    from concept_grounding.cli import main

    calls = []
    monkeypatch.setitem(
        sys.modules,
        "spy_oracle",
        types.SimpleNamespace(predict=lambda images: calls.append(len(images)) or np.full((len(images), 312), 0.5)),
    )
    argv = [
        "filter",
        "--in",
        str(_image_folder(tmp_path / "in")),
        "--out",
        str(tmp_path / "out"),
        "--scorer",
        "oracle",
        "--oracle",
        "spy_oracle:predict",
        "--keep-fraction",
        fraction,
    ]
    assert main(argv) == 2
    assert f"argument --keep-fraction: must be a number in (0, 1], got '{fraction}'" in capsys.readouterr().err
    assert calls == [] and not (tmp_path / "out").exists()
    assert main(argv[:-1] + ["0.5"]) == 0 and calls == [4]  # the same call with a valid fraction scores once


def test_filter_keeps_the_evidence_of_every_image():
    """Every image's answers and the reason it was kept or discarded (SUB Fig. 5).
    Blue Jay: 4 of 10 answer red (2 kept, 2 ranked lower), the rest its own eye colour S-;
    Cardinal: 1 answers red (< 2 needed: pairing dropped), the rest a third colour."""
    options = group_options("eye_color")
    red, own, third = options.index("red"), 0, 1
    removed = [f"has_eye_color::{options[own]}"]
    records = [
        {
            "file_name": f"jay_{i}.png",
            "reference_class": "073.Blue_Jay",
            "target_attribute": "has_eye_color::red",
            "removed_attributes": removed,
            "i": i,
        }
        for i in range(10)
    ]
    records += [
        {
            "file_name": f"card_{i}.png",
            "reference_class": "017.Cardinal",
            "target_attribute": "has_eye_color::red",
            "removed_attributes": removed,
            "i": i,
        }
        for i in range(10)
    ]

    def probs_for(rows, question, options):
        p = np.full((len(rows), len(options)), 0.01)
        for k, r in enumerate(rows):
            jay = r["reference_class"] == "073.Blue_Jay"
            answer = red if r["i"] < (4 if jay else 1) else (own if jay else third)
            p[k, answer] = 0.5 + 0.01 * r["i"]
        return p / p.sum(axis=1, keepdims=True)

    result = filter_records(records, probs_for, keep_fraction=0.2)
    evidence = {e["file_name"]: e for e in result.evidence}
    assert len(evidence) == 20
    reasons = [evidence[f"jay_{i}.png"]["reason"] for i in range(10)]
    assert reasons == ["low_rank", "low_rank", "kept", "kept"] + ["no_change"] * 6
    assert [evidence[f"jay_{i}.png"]["rank"] for i in range(4)] == [4, 3, 2, 1]
    assert [evidence[f"card_{i}.png"]["reason"] for i in range(10)] == ["pairing_dropped"] + ["s_plus_not_seen"] * 9
    row = evidence["jay_5.png"]
    assert row["answer"] == options[own] and not row["kept"] and row["rank"] is None
    assert set(row["probabilities"]) == set(options) and abs(sum(row["probabilities"].values()) - 1) < 1e-9
    assert result.report["reasons"] == {
        "low_rank": 2,
        "kept": 2,
        "no_change": 6,
        "pairing_dropped": 1,
        "s_plus_not_seen": 9,
    }


def test_another_attribute_changed_is_discarded_when_groups_are_checked():
    """``check_groups``: an image answering S+ whose bill colour is no longer the Blue Jay's
    (black) is not kept (reason other_changed); a group the class has no value in is not asked."""
    eye, bill = group_options("eye_color"), group_options("bill_color")
    records = [
        {"file_name": f"{i}.png", "reference_class": "073.Blue_Jay", "target_attribute": "has_eye_color::red", "i": i}
        for i in range(10)
    ]
    asked = []

    def probs_for(rows, question, options):
        asked.append(question.split(" does")[0])
        p = np.full((len(rows), len(options)), 0.01)
        for k, r in enumerate(rows):
            if options == eye:
                p[k, eye.index("red") if r["i"] < 4 else 0] = 0.5 + 0.01 * r["i"]
            else:
                p[k, bill.index("black") if r["i"] % 2 == 0 else bill.index("buff")] = 0.9
        return p / p.sum(axis=1, keepdims=True)

    values = {"073.Blue_Jay": {"has_bill_color::black"}}
    result = filter_records(
        records, probs_for, keep_fraction=0.2, check_groups=("bill_color", "leg_color"), class_values=values
    )
    reasons = [e["reason"] for e in result.evidence]
    assert reasons[:4] == ["kept", "other_changed", "kept", "other_changed"]
    assert [r["i"] for r in result.kept] == [2, 0]
    assert result.evidence[1]["other_answers"] == {"bill_color": "buff"}
    assert asked == ["What type of eye color", "What type of bill color"]  # no leg colour: the class has none
    plain = filter_records(records, probs_for, keep_fraction=0.2)
    assert [r["i"] for r in plain.kept] == [3, 2]  # the paper's filter, unchanged
    with pytest.raises(ValueError, match="class_values"):
        filter_records(records, probs_for, check_groups=("bill_color",))


def test_the_validation_world_side_is_size_and_the_old_flag_still_works(capsys, tmp_path):
    """The image side is ``--size`` in filter too; ``--world-size`` (its old name) is a
    hidden alias of the same setting, so command lines written before keep working."""
    from concept_grounding.cli import build_parser

    def size(*argv: str) -> int:
        return build_parser().parse_args(["filter", "--in", str(tmp_path), "--out", str(tmp_path / "f"), *argv]).size

    assert size() == 128 and size("--size", "32") == 32 and size("--world-size", "48") == 48
    with pytest.raises(SystemExit):
        build_parser().parse_args(["filter", "--help"])
    text = capsys.readouterr().out
    assert "--size" in text and "--world-size" not in text
