"""The grounded judge and its validation on the world's exact truth.

The validation stage must pass the exact oracle, fail a judge that reads only the species
(SUB's failure), and the benchmark must then refuse to print a substitution finding.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from concept_grounding.judge import (
    JUDGE_BARS,
    exact_edits,
    judge_training_set,
    typical_renders,
    validate_judge,
)
from concept_grounding.judge.data import VALIDATION_START
from concept_grounding.world import BirdWorld, WorldConfig

CLASSES = ("017.Cardinal", "073.Blue_Jay", "036.Northern_Flicker")


@pytest.fixture(scope="module")
def world() -> BirdWorld:
    return BirdWorld(WorldConfig(image_size=32, class_names=CLASSES, pose="canonical", scene="plain"))


@pytest.fixture(scope="module")
def pairings(world):
    return world.default_pairings()[::6]


@pytest.fixture(scope="module")
def truth(world, pairings):
    """Image bytes -> (species, (312,) attributes) for every image the validation draws."""
    edits = exact_edits(world, pairings, 1, VALIDATION_START)
    table = {
        im.tobytes(): (int(label), attrs)
        for im, label, attrs in zip(edits.edited, edits.labels, edits.edited_attributes)
    }
    table.update(
        {
            im.tobytes(): (int(label), attrs)
            for im, label, attrs in zip(edits.original, edits.labels, edits.original_attributes)
        }
    )
    renders = typical_renders(world, 2, VALIDATION_START + 10_000)
    for im, label, attrs in zip(renders.images, renders.labels, renders.attributes):
        table[im.tobytes()] = (int(label), attrs)
    return table


def oracle_judge(truth):
    def judge(images):
        rows = [truth[np.asarray(im).tobytes()] for im in images]
        return np.array([r[0] for r in rows]), np.stack([r[1] for r in rows]).astype(float)

    return judge


def species_only_judge(truth, world):
    """Knows the species perfectly and recites its class-level attributes."""

    def judge(images):
        species = np.array([truth[np.asarray(im).tobytes()][0] for im in images])
        return species, world.class_attributes[species].astype(float)

    return judge


# ----------------------------------------------------------------------------- world settings
def test_canonical_pose_faces_right_centred_and_keeps_the_birds(world):
    varied = BirdWorld(WorldConfig(image_size=32, class_names=CLASSES))
    for i in range(6):
        a, b = world.sample(i), varied.sample(i)
        assert a.pose.facing == "right" and a.pose.angle == 0.0 and a.pose.cast == (1.0, 1.0, 1.0)
        assert (a.attributes == b.attributes).all() and a.label == b.label  # same birds, other drawing
        x, y, w, h = a.bbox
        assert x >= 0 and x + w <= 32 and abs((2 * y + h) / 2 - 16) <= 3  # whole bird, vertically centred


def test_plain_scene_is_flat_and_has_no_perch(world):
    from concept_grounding.world.backgrounds import PLAIN_RGB

    s = world.sample(0)
    top = s.image[:6].reshape(-1, 3).astype(float)  # above the bird: backdrop and grain only
    assert not s.mask[:6].any()
    assert np.abs(top.mean(0) - np.array(PLAIN_RGB)).max() < 2 and top.std(0).max() < 6


def test_zoom_scales_the_bird():
    small = BirdWorld(WorldConfig(image_size=64, pose="canonical", zoom=0.7)).sample(0)
    full = BirdWorld(WorldConfig(image_size=64, pose="canonical")).sample(0)
    assert small.mask.sum() < 0.6 * full.mask.sum()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"pose": "tilted"}, "pose must be"), ({"scene": "night"}, "scene must be"), ({"zoom": 3.0}, "zoom must be")],
)
def test_world_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WorldConfig(**kwargs)


def test_default_world_is_unchanged():
    """The new settings default to the world as it was (its renders pinned elsewhere too)."""
    c = WorldConfig()
    assert (c.pose, c.zoom, c.scene) == ("varied", 1.0, "varied")


# ----------------------------------------------------------------------------- validation
def test_validation_passes_the_exact_oracle(world, pairings, truth):
    v = validate_judge(oracle_judge(truth), world, pairings, per_pairing=1, renders_per_class=2)
    assert v.raw.overall == {
        "s_plus_found": 1.0,
        "s_minus_removed": 1.0,
        "species_kept": 1.0,
        "render_attributes": 1.0,
        "render_species": 1.0,
    }
    assert v.supports_finding and not v.failures
    assert set(v.validated_groups) == {world.vocab.group_of(world.vocab.attribute_index(a)) for _, a in pairings}
    assert "passes" in v.to_markdown()


def test_validation_fails_a_judge_that_reads_the_species(world, pairings, truth):
    v = validate_judge(species_only_judge(truth, world), world, pairings, per_pairing=1, renders_per_class=2)
    assert v.raw.overall["s_plus_found"] == 0.0  # a pairing's S+ is, by construction, absent from the class
    assert v.raw.overall["species_kept"] == 1.0
    assert not v.supports_finding and v.validated_groups == ()
    assert any(f.startswith("s_plus_found") for f in v.failures)
    assert "FAILS" in v.to_markdown()


def test_validation_reports_a_transform_condition(world, pairings, truth):
    noisy = lambda x: np.clip(x.astype(int) + 1, 0, 255).astype(np.uint8)  # noqa: E731  (unknown to the oracle)
    lookup = oracle_judge(truth)

    def judge(images):  # the oracle answers what it knows; shifted images read as species 0, nothing found
        try:
            return lookup(images)
        except KeyError:
            return np.zeros(len(images), int), np.zeros((len(images), 312))

    v = validate_judge(judge, world, pairings, 1, 2, transforms={"shifted": noisy})
    assert set(v.conditions) == {"raw", "shifted"}
    assert v.conditions["shifted"].overall["s_plus_found"] == 0.0
    assert v.supports_finding  # bars apply to raw images


def _bench():
    """The world TDG experiment's stages (``benchmarks/bench_tdg_world.py`` only calls them)."""
    from experiments import world_tdg

    return world_tdg


def test_benchmark_refuses_a_finding_when_validation_fails(world, pairings, truth, tmp_path):
    from experiments.world_tdg_stats import write_world_tdg_report  # benchmarks/bench_tdg_world.py's report

    v = validate_judge(species_only_judge(truth, world), world, pairings, 1, 2)
    results = {
        "command": "x",
        "seconds": 1.0,
        "validation": {**v.to_dict(), "markdown": v.to_markdown()},
        "table": {"overall": {}},
    }
    write_world_tdg_report(results, tmp_path / "report.md")
    text = (tmp_path / "report.md").read_text()
    assert "## No substitution finding" in text and "s_plus_found 0.000 < 0.95" in text
    assert "## Substitution" not in text


# ----------------------------------------------------------------------------- training
def test_training_set_breaks_the_species_attribute_tie(world):
    data = judge_training_set(world, 2)
    deviant = data.labels == -1
    assert deviant.sum() == 2 * 2 * world.num_classes  # twice as many deviant renders, species-free
    assert (~data.trains_attributes[: 2 * world.num_classes]).all()  # typical renders teach the species only
    typical_attrs = world.class_attributes[data.labels[~deviant]]
    cols = list(world.rendered_attributes)
    # deviant birds disagree with their class far more than typical ones do
    assert (data.attributes[~deviant][:, cols] != typical_attrs[:, cols]).mean() < 0.1


def test_train_judge_is_seeded_and_leaves_the_global_rng_alone(world):
    import torch

    from concept_grounding.judge import judge_images, train_judge

    data = judge_training_set(world, 1)
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = train_judge(data, world.class_names, epochs=1, batch_size=32, seed=3, progress=False)
    assert torch.equal(torch.random.get_rng_state(), before)
    b = train_judge(data, world.class_names, epochs=1, batch_size=32, seed=3, progress=False)
    species, probs = judge_images(a, data.images[:4])
    assert species.shape == (4,) and probs.shape == (4, 312)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_judge_attribute_probabilities_follow_the_traits(world):
    """Base groups: softmax; derived groups: present when any base behind them shows the value."""
    import torch

    from concept_grounding.judge import WorldJudge

    judge = WorldJudge(32, world.class_names, width=8)
    layout, vocab = judge.traits, world.vocab
    assert set(judge.attribute_columns) == set(world.rendered_attributes)
    s = world.sample(0)
    logits = torch.full((1, layout.size), -30.0)
    for k, group in enumerate(layout.base_columns):  # a confident, correct trait read
        logits[0, layout.slices[k].start + int(np.argmax(s.attributes[list(group)]))] = 30.0
    probs = judge.attribute_probabilities(logits)[0].numpy()
    cols = list(world.rendered_attributes)
    assert np.allclose(probs[cols], s.attributes[cols], atol=1e-6)
    assert np.allclose(
        layout.targets(s.attributes[None])[0], [int(np.argmax(s.attributes[list(c)])) for c in layout.base_columns]
    )
    uniform = judge.attribute_probabilities(torch.zeros(1, layout.size))[0].numpy()
    k = vocab.attribute_index("has_primary_color::red")  # back or wing red, each 1/15
    assert np.isclose(uniform[k], 1 - (1 - 1 / 15) ** 2)


def test_judge_round_trips_through_save_pretrained(world, tmp_path):
    import torch

    from concept_grounding.judge import WorldJudge, judge_images

    judge = WorldJudge(32, world.class_names, width=8).eval()
    judge.save_pretrained(tmp_path / "j")
    again = WorldJudge.from_pretrained(tmp_path / "j").eval()
    x = world.sample(0).image[None]
    assert np.allclose(judge_images(judge, x)[1], judge_images(again, x)[1])
    with pytest.raises(ValueError, match="images must be"):
        judge(torch.zeros(1, 3, 16, 16))


# ----------------------------------------------------------------------------- scorer validation
def test_scorer_validation_ranks_an_oracle_perfectly_and_a_blind_scorer_at_chance(world, pairings, truth):
    from concept_grounding.judge import validate_scorer_on_world
    from concept_grounding.tdg.filter_scorers import AttributeJudgeScorer

    lookup = {k: v[1] for k, v in truth.items()}
    oracle = AttributeJudgeScorer(lambda ims: np.stack([lookup[np.asarray(i).tobytes()] for i in ims]).astype(float))
    good = validate_scorer_on_world(oracle, world, pairings)
    assert (
        good.overall["auroc"] == 1.0 and good.overall["s_plus_accuracy"] == 1.0 and good.overall["false_s_plus"] == 0.0
    )

    class Blind:
        def score(self, images, question, options, group):
            return np.full((len(images), len(options)), 1.0 / len(options))

    blind = validate_scorer_on_world(Blind(), world, pairings)
    assert blind.overall["auroc"] == 0.5
    assert "AUROC" in blind.to_markdown()


def test_filter_validate_on_world_cli(tmp_path):
    out = tmp_path / "v"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "concept_grounding.cli",
            "filter",
            "--out",
            str(out),
            "--scorer",
            "tiny-clip",
            "--validate-on-world",
            "--size",
            "32",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "scorer_validation.json").read_text())
    assert report["edits"] == len(BirdWorld(WorldConfig(image_size=32)).default_pairings())
    assert 0.0 <= report["overall"]["auroc"] <= 1.0 and "| **all** |" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "concept_grounding.cli", "filter", "--out", str(out), "--scorer", "tiny-clip"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--in" in r.stderr


def test_bars_are_the_issue_s():
    assert dict(JUDGE_BARS) == {
        "s_plus_found": 0.95,
        "s_minus_removed": 0.95,
        "species_kept": 0.95,
        "render_attributes": 0.95,
        "render_species": 0.95,
    }


def test_judge_card_states_the_measured_training_time(world, tmp_path):
    bench = _bench()
    args = bench.WorldTDGSettings(out=tmp_path)
    assert bench.judge_cost(world, args) == ""  # a judge cached before times were recorded
    folder = bench.judge_folder(world, args)
    folder.mkdir(parents=True)
    (folder / "training_time.json").write_text('{"render_seconds": 65, "train_seconds": 540, "threads": 2}')
    assert bench.judge_cost(world, args) == "; measured 1 min rendering + 9 min training with 2 thread(s)"


def test_benchmark_contact_sheet_draws_the_verdicts_of_each_method(tmp_path):
    from PIL import Image

    bench = _bench()
    bird = Image.new("RGB", (8, 8), "blue")
    pairing = {"reference_class": "073.Blue_Jay", "target_attribute": "has_crown_color::yellow", "image_index": 0}
    records = [
        {**pairing, "method": "prompting", "image_id": 0, "s_plus_found": False, "species_kept": True},
        {
            **pairing,
            "method": "tdg",
            "image_id": 0,
            "guide_image_id": 0,
            "s_plus_found": True,
            "species_kept": True,
            "guide_s_plus": True,
        },
    ]
    sub = {"records": records, "images": {"prompting": [bird], "tdg": [bird], "tdg:guide": [bird]}}
    bench.contact_sheet(sub, tmp_path / "sheet.png")
    assert Image.open(tmp_path / "sheet.png").size[1] > 100


def test_exported_judge_records_the_groups_it_is_validated_on(world, pairings, truth, tmp_path):
    from concept_grounding.judge import WorldJudge, judge_validated_groups

    bench = _bench()
    v = validate_judge(oracle_judge(truth), world, pairings, per_pairing=1, renders_per_class=2)
    assert judge_validated_groups(tmp_path) is None  # a folder without validation.json
    bench.export_judge(
        WorldJudge(32, world.class_names, width=8), v, {"world": "w", "command": "c"}, tmp_path / "judge"
    )
    assert judge_validated_groups(tmp_path / "judge") == frozenset(v.validated_groups) and v.validated_groups


def test_shipped_judge_validation_agrees_with_its_model_card():
    from concept_grounding.judge import judge_validated_groups
    from concept_grounding.judge.model import WORLD_JUDGE_DIR

    card = (WORLD_JUDGE_DIR / "README.md").read_text().splitlines()
    rows = [line.strip("| ").split(" | ") for line in card if line.startswith("| ") and line.count("|") == 5]
    marked = {cells[0] for cells in rows if cells[-1] == "yes"}
    assert marked and judge_validated_groups() == frozenset(marked)
