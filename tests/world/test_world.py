"""The bird world: determinism, ground truth, counterfactual locality, exports."""

from __future__ import annotations

import numpy as np
import pytest

from concept_grounding import load_vocabulary
from concept_grounding.schema import cub_features, sub_features
from concept_grounding.world import BirdSample, BirdWorld, Counterfactual, WorldConfig
from concept_grounding.world.sample import dilate_mask
from concept_grounding.world.species import COLORS, DERIVED_GROUPS

VOCAB = load_vocabulary()
CLASSES = ("017.Cardinal", "073.Blue_Jay", "047.American_Goldfinch", "129.Song_Sparrow")


@pytest.fixture(scope="module")
def world() -> BirdWorld:
    return BirdWorld(WorldConfig(image_size=96, class_names=CLASSES, seed=3))


def test_determinism_by_seed(world):
    a, b = world.sample(5), BirdWorld(world.config).sample(5)
    assert np.array_equal(a.image, b.image) and np.array_equal(a.part_map, b.part_map)
    assert np.array_equal(a.attributes, b.attributes) and a.pose == b.pose
    other = BirdWorld(WorldConfig(image_size=96, class_names=CLASSES, seed=4)).sample(5)
    assert not np.array_equal(a.image, other.image)
    assert not np.array_equal(world.sample(6).image, a.image)


def test_shapes_and_dtypes(world):
    s = world.sample(2)
    assert isinstance(s, BirdSample) and s.label == 2
    assert s.image.shape == (96, 96, 3) and s.image.dtype == np.uint8
    assert s.mask.shape == (96, 96) and s.mask.dtype == bool
    assert s.part_map.dtype == np.uint8 and s.part_map.max() <= 15
    assert np.array_equal(s.mask, s.part_map > 0)
    assert s.part_xy.shape == (15, 2) and s.part_xy.dtype == np.float32
    assert s.part_visible.shape == (15,) and s.part_visible.dtype == bool
    assert s.attributes.shape == (312,) and s.attributes.dtype == np.uint8
    assert world.class_attributes.shape == (4, 312) and world.class_attributes.dtype == np.uint8
    x, y, w, h = s.bbox
    ys, xs = np.nonzero(s.mask)
    assert (x, y, x + w - 1, y + h - 1) == (xs.min(), ys.min(), xs.max(), ys.max())
    assert 0.05 * 96 * 96 < s.mask.sum() < 0.5 * 96 * 96


def test_labels_one_value_per_base_group(world):
    s = world.sample(0)
    for group in ("crown_color", "eye_color", "bill_shape", "wing_pattern", "tail_pattern"):
        assert s.attributes[list(VOCAB.groups[group])].sum() == 1
    # derived: primary colour is the set of back and wing colours
    expected = {s.traits["back_color"], s.traits["wing_color"]}
    got = {VOCAB.attributes[i].split("::")[1] for i in VOCAB.groups["primary_color"] if s.attributes[i]}
    assert got == expected
    assert not s.attributes[[i for i in range(312) if i not in world.rendered_attributes]].any()


def test_colour_table_and_groups(world):
    assert len(COLORS) == 15 and {"iridescent", "buff", "rufous", "olive"} <= set(COLORS)
    assert len(VOCAB.groups["eye_color"]) == 14
    required = {
        f"{p}_color"
        for p in (
            "crown",
            "forehead",
            "nape",
            "throat",
            "breast",
            "belly",
            "back",
            "wing",
            "primary",
            "underparts",
            "eye",
            "leg",
            "bill",
        )
    }
    required |= {"bill_shape", "breast_pattern", "tail_pattern", "wing_pattern"}
    assert required <= set(world.rendered_groups)
    for value in ("cone", "needle", "dagger", "hooked"):
        assert VOCAB.attribute_index(f"has_bill_shape::{value}") in world.rendered_attributes
    for group in ("breast_pattern", "tail_pattern", "wing_pattern"):
        assert set(VOCAB.groups[group]) <= set(world.rendered_attributes)


def test_every_sub_attribute_is_rendered(world):
    missing = [a for a in VOCAB.sub_substitutions.values() if VOCAB.attribute_index(a) not in world.rendered_attributes]
    assert missing == []


def _source_without(world: BirdWorld, attribute: str, start: int = 0) -> BirdSample:
    i = VOCAB.attribute_index(attribute)
    for k in range(start, start + 200):
        s = world.sample(k)
        if s.attributes[i] == 0:
            return s
    raise AssertionError(f"no sample without {attribute}")


@pytest.mark.parametrize("attribute", list(VOCAB.sub_substitutions.values()))
def test_counterfactual_is_local_for_every_sub_attribute(world, attribute):
    s = _source_without(world, attribute, start=VOCAB.attribute_index(attribute) % 7)
    cf = world.counterfactual(s, attribute)
    assert isinstance(cf, Counterfactual) and cf.target_attribute == attribute
    i = VOCAB.attribute_index(attribute)
    assert cf.original.attributes[i] == 0 and cf.edited.attributes[i] == 1
    diff = np.any(cf.original.image != cf.edited.image, axis=-1)
    assert diff.sum() > 0, "the substitution must be visible"
    allowed = cf.changed_mask(dilate=2)
    assert not (diff & ~allowed).any(), f"{int((diff & ~allowed).sum())} pixels changed outside {cf.changed_parts}"
    # S-: the original's values of the group that are now off
    group = VOCAB.group_of(attribute)
    for name in cf.removed_attributes:
        j = VOCAB.attribute_index(name)
        assert VOCAB.group_of(name) == group and cf.original.attributes[j] == 1 and cf.edited.attributes[j] == 0
    assert cf.removed_attributes, "the original had some value of the group"
    # same pose/background: the mask only changes where the bill was reshaped
    if group != "bill_shape":
        assert np.array_equal(cf.original.part_map, cf.edited.part_map)
    # the changed parts belong to the group (or the base groups of a derived group)
    bases = DERIVED_GROUPS.get(group, (group,))
    assert set(cf.changed_parts) <= {p for b in bases for p in VOCAB.group_parts[b]}
    # world.edited: the same edit without rendering the original (what the SUB exports use)
    edited, removed = world.edited(s.index, attribute)
    assert removed == cf.removed_attributes and edited.traits == cf.edited.traits
    for name in ("image", "mask", "part_map", "part_xy", "part_visible", "attributes"):
        assert np.array_equal(getattr(edited, name), getattr(cf.edited, name)), name


def test_edited_is_none_and_renders_nothing_when_the_bird_already_shows_the_target(world, monkeypatch):
    s = world.sample(0)
    crown = list(VOCAB.groups["crown_color"])
    shown = VOCAB.attributes[crown[int(np.flatnonzero(s.attributes[crown])[0])]]
    assert world.counterfactual(s, shown).changed_parts == ()
    monkeypatch.setattr("concept_grounding.world.counterfactual.render_bird", lambda *a, **k: pytest.fail("rendered"))
    assert world.edited(0, shown) == (None, ())


def test_derived_substitution_updates_every_label(world):
    s = world.sample(0)
    cf = world.counterfactual(s, "has_underparts_color::red")
    e = cf.edited
    for name in ("has_breast_color::red", "has_belly_color::red", "has_underparts_color::red"):
        assert e.attributes[VOCAB.attribute_index(name)] == 1
    assert e.attributes[list(VOCAB.groups["underparts_color"])].sum() == 1
    cf = world.counterfactual(s, "has_primary_color::green")
    assert cf.edited.traits["back_color"] == cf.edited.traits["wing_color"] == "green"
    assert cf.edited.attributes[VOCAB.attribute_index("has_upperparts_color::green")] == 1


def test_bill_shape_changes_only_the_beak_region(world):
    s = world.sample(1)
    target = "has_bill_shape::needle" if s.traits["bill_shape"] != "needle" else "has_bill_shape::cone"
    cf = world.counterfactual(s, target)
    assert cf.changed_parts == ("beak",)
    diff = np.any(cf.original.image != cf.edited.image, axis=-1)
    beak = dilate_mask(cf.original.part_mask("beak") | cf.edited.part_mask("beak"), 2)
    assert diff.any() and not (diff & ~beak).any()


def test_part_centres_inside_their_masks(world):
    for s in world.samples(range(12)):
        near = "right" if s.pose.facing == "right" else "left"
        expected = {
            "back",
            "beak",
            "belly",
            "breast",
            "crown",
            "forehead",
            "nape",
            "tail",
            "throat",
            f"{near} eye",
            f"{near} wing",
            f"{near} leg",
        }
        visible = {VOCAB.parts[i] for i in np.flatnonzero(s.part_visible)}
        assert expected <= visible, (s.index, expected - visible)
        for i in np.flatnonzero(s.part_visible):
            x, y = np.round(s.part_xy[i]).astype(int)
            assert dilate_mask(s.part_mask(int(i)), 1)[y, x]


def test_facing_flips_far_part_visibility(world):
    facings = {}
    for s in world.samples(range(20)):
        facings.setdefault(s.pose.facing, s)
    assert set(facings) == {"left", "right"}
    vis = {f: {VOCAB.parts[i] for i in np.flatnonzero(s.part_visible)} for f, s in facings.items()}
    assert {"right eye", "right wing"} <= vis["right"] and not {"left eye", "left wing"} & vis["right"]
    assert {"left eye", "left wing"} <= vis["left"] and not {"right eye", "right wing"} & vis["left"]
    # the beak points the way the bird faces
    for f, s in facings.items():
        beak_x, body_x = s.part_xy[VOCAB.part_index("beak"), 0], s.part_xy[VOCAB.part_index("belly"), 0]
        assert (beak_x > body_x) == (f == "right")


def test_rotation_keeps_centres_on_parts():
    w = BirdWorld(WorldConfig(image_size=128, class_names=CLASSES[:1], seed=0))
    angles = []
    for s in w.samples(range(30)):
        angles.append(s.pose.angle)
        for i in np.flatnonzero(s.part_visible):
            x, y = np.round(s.part_xy[i]).astype(int)
            assert dilate_mask(s.part_mask(int(i)), 1)[y, x]
    assert max(angles) > 6 and min(angles) < -6
    assert len({s.pose.background for s in w.samples(range(30))}) >= 4


def test_majority_vote_recovers_class_vectors():
    w = BirdWorld(WorldConfig(image_size=32, class_names=CLASSES[:2], deviation_rate=0.3, seed=1))
    labels = np.stack([s.attributes for s in w.samples(range(120))])
    classes = np.arange(120) % 2
    frac_dev = []
    for c in range(2):
        votes = labels[classes == c].mean(axis=0)
        assert np.array_equal((votes > 0.5).astype(np.uint8), w.class_attributes[c])
        frac_dev.append((labels[classes == c] != w.class_attributes[c]).any(axis=1).mean())
    assert min(frac_dev) > 0.5  # labels really are noisy per image
    clean = BirdWorld(WorldConfig(image_size=32, class_names=CLASSES[:2], deviation_rate=0.0, seed=1))
    assert all(np.array_equal(s.attributes, clean.class_attributes[s.label]) for s in clean.samples(range(6)))


def test_classes_share_values():
    w = BirdWorld(WorldConfig(image_size=32))
    assert w.num_classes == 33 and w.class_names == VOCAB.sub_classes
    assert len({tuple(r) for r in w.class_attributes}) == 33
    shared = (w.class_attributes.sum(axis=0) >= 2).sum()
    assert shared > 20


def test_to_dataset_dict_features(world):
    dd = world.to_dataset_dict(train_per_class=1, test_per_class=1)
    assert set(dd) == {"train", "test"} and dd["train"].num_rows == 4 and dd["test"].num_rows == 4
    assert dd["train"].features == cub_features(CLASSES)
    ids = list(dd["train"]["image_id"]) + list(dd["test"]["image_id"])
    assert len(set(ids)) == 8 and min(ids) == 1
    row = dd["test"][1]
    s = world.sample(row["image_id"] - 1)
    assert row["file_name"] == "073.Blue_Jay/Blue_Jay_0005.png" and row["label"] == 1 and not row["is_train"]
    assert np.array_equal(np.asarray(row["image"]), s.image)
    assert np.array_equal(np.asarray(row["mask"]) == 255, s.mask)
    assert np.array_equal(np.asarray(row["part_map"]), s.part_map)
    assert np.allclose(row["part_xy"], s.part_xy) and row["certainty"] == [4] * 312
    assert row["class_attributes"] == world.class_attributes[1].tolist()


def test_sub_dataset_schema(world):
    pairs = [("017.Cardinal", "has_bill_shape::needle"), ("073.Blue_Jay", "has_crown_color::pink")]
    ds = world.sub_dataset(per_pairing=2, pairings=pairs)
    assert ds.features == sub_features() and ds.num_rows == 4
    row = ds[2]
    assert row["reference_class"] == "073.Blue_Jay" and row["group"] == "crown_color"
    src = world.sample(row["source_id"])
    cf = world.counterfactual(src, "has_crown_color::pink")
    assert np.array_equal(np.asarray(row["image"]), cf.edited.image)
    assert row["removed_attributes"] == list(cf.removed_attributes) and row["seed"] == 3
    defaults = world.default_pairings()
    for name, attr in defaults:
        assert world.class_attributes[world.class_names.index(name), VOCAB.attribute_index(attr)] == 0
    assert len(defaults) > 4 * 20


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda w: w.counterfactual(w.sample(0), "has_crown_color::plaid"), "unknown target_attribute"),
        (lambda w: w.counterfactual(w.sample(0), "has_size::small_(5_-_9_in)"), "not rendered"),
        (lambda w: w.counterfactual(w.sample(0), "has_bill_shape::specialized"), "not drawn"),
        (lambda w: w.sample(-1), "index must be >= 0"),
        (lambda w: w.to_dataset_dict(train_per_class=-1), "train_per_class"),
        (lambda w: w.sample(0).part_mask("wingtip"), "unknown part"),
    ],
)
def test_bad_input_errors(world, call, match):
    with pytest.raises(ValueError, match=match):
        call(world)


def test_bad_config_errors():
    with pytest.raises(ValueError, match="image_size"):
        WorldConfig(image_size=16)
    with pytest.raises(ValueError, match="deviation_rate"):
        WorldConfig(deviation_rate=1.5)
    with pytest.raises(ValueError, match="class_names"):
        BirdWorld(WorldConfig(class_names=("Cardinal",)))


def test_world_command_writes_export(tmp_path):
    import json

    from concept_grounding.cli import main

    out = tmp_path / "w"
    rc = main(
        [
            "world",
            "--out",
            str(out),
            "--size",
            "48",
            "--train-per-class",
            "1",
            "--test-per-class",
            "1",
            "--classes",
            "017.Cardinal",
            "073.Blue_Jay",
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_images"] == 2 and summary["test_images"] == 2 and summary["num_classes"] == 2
    assert (out / "contact_sheet.png").stat().st_size > 1000 and (out / "summary.md").exists()
    import datasets

    dd = datasets.load_from_disk(str(out / "hf"))
    assert dd["train"].features == cub_features(["017.Cardinal", "073.Blue_Jay"])


def test_labels_without_rendering_match_the_renders():
    world = BirdWorld(WorldConfig(image_size=48, seed=3, deviation_rate=0.3))
    for index, target in [
        (0, None),
        (5, "has_crown_color::black"),
        (7, "has_underparts_color::red"),
        (11, "has_bill_shape::needle"),
    ]:
        sample = world.sample(index)
        expected = sample.attributes if target is None else world.counterfactual(sample, target).edited.attributes
        np.testing.assert_array_equal(world.labels(index, target), expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(formats="png"), "formats must be one of"),
        (dict(train_per_class=-1), "train_per_class and test_per_class must be >= 0"),
        (dict(per_pairing=0), "per_pairing must be >= 1"),
    ],
)
def test_world_export_config_refuses_bad_values(kwargs, message):
    from concept_grounding.world.export import WorldExportConfig

    with pytest.raises(ValueError, match=message):
        WorldExportConfig(**kwargs)
    with pytest.raises(ValueError, match="image_size"):  # the renderer's own check, on the world it holds
        WorldExportConfig(WorldConfig(image_size=16))
