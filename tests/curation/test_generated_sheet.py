"""generate's contact sheet: the world judge's verdicts on images whose truth is known (the world's exact
drawings of each pairing), and the same images under a false claim."""

from __future__ import annotations

import json

import pytest

from concept_grounding.curation.generated_sheet import SHEET_NAME, contact_sheet, judge_captions, read_metadata
from concept_grounding.judge import judge_validated_groups, load_world_judge
from concept_grounding.vocabulary import load_vocabulary
from concept_grounding.world import BirdWorld, WorldConfig

#: the world the shipped judge was validated on (assets/world_judge/README.md)
JUDGE_WORLD = WorldConfig(image_size=32, pose="canonical", scene="plain", zoom=1.0, deviation_rate=0.1)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """A folder laid out as ``generate`` writes it, holding the world's exact drawings of 8 validated pairings."""
    vocab, validated = load_vocabulary(), judge_validated_groups()
    sub = BirdWorld(JUDGE_WORLD).sub_dataset(per_pairing=1)
    rows = [
        r
        for r in sub
        if vocab.group_of(r["target_attribute"]) in validated
        and r["reference_class"] in ("017.Cardinal", "073.Blue_Jay")
    ][:8]
    folder = tmp_path_factory.mktemp("gen")
    records = []
    for i, row in enumerate(rows):
        name = f"{row['reference_class']}/{i:04d}.png"
        (folder / row["reference_class"]).mkdir(exist_ok=True)
        row["image"].save(folder / name)
        records.append(
            {
                "file_name": name,
                "reference_class": row["reference_class"],
                "seed": i,
                "target_attribute": row["target_attribute"],
                "removed_attributes": row["removed_attributes"],
            }
        )
    (folder / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder, rows, records


def test_the_judge_finds_what_was_drawn_and_not_a_false_claim(drawn):
    _, rows, records = drawn
    judge = load_world_judge()
    captions, verdicts = judge_captions(judge, [r["image"] for r in rows], records)
    assert verdicts["success"].all() and captions[0] == ("S+ found, species kept", True)
    shifted = [
        dict(r, target_attribute=records[(i + 1) % len(records)]["target_attribute"]) for i, r in enumerate(records)
    ]
    _, lied = judge_captions(judge, [r["image"] for r in rows], shifted)
    assert not lied["s_plus_found"].any()
    guides, _ = judge_captions(judge, [r["image"] for r in rows], records, guide=True)
    assert guides[0] == ("S+ found", True)


def test_contact_sheet_is_drawn_with_and_without_a_judge(drawn, tmp_path):
    folder, _, records = drawn
    assert read_metadata(folder) == records
    judged = contact_sheet(folder, judge=True)
    plain = contact_sheet(folder, judge=False, path=tmp_path / "plain.png")
    assert judged == folder / SHEET_NAME and judged.stat().st_size > 1000 and plain.stat().st_size > 1000
    assert judged.read_bytes() != plain.read_bytes()
    assert contact_sheet(tmp_path, judge=True) is None  # nothing generated yet: no sheet
