"""The composition judge: exact targets from the world, a head that learns, the validation it prints."""

import numpy as np
import pytest
import torch

from concept_grounding.judge.composition import (
    HEADS,
    CompositionJudge,
    composition_set,
    train_composition_judge,
    validate_composition_judge,
)
from concept_grounding.world import BirdWorld, WorldConfig


@pytest.fixture(scope="module")
def world():
    return BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal", "073.Blue_Jay")))


def test_targets_are_the_worlds_truth(world):
    s = composition_set(world, 6, start=2, seed=3)
    rng = np.random.default_rng([3, 2, 303])
    varied = BirdWorld(WorldConfig(image_size=32, class_names=world.class_names))
    for n, i in enumerate([c + k * 2 for c in range(2) for k in range(2, 8)]):
        comp = varied.composition(i, int(rng.integers(1, 4)))
        assert (s.images[n] == comp.image).all()
        assert s.targets["count"][n] == comp.count - 1 and HEADS["scene"][s.targets["scene"][n]] == comp.scene
        assert HEADS["facing"][s.targets["facing"][n]] == comp.facing and s.targets["species"][n] == comp.label


def test_judge_learns_the_scene_and_validation_reports_every_head(world):
    torch.set_num_threads(1)
    judge = train_composition_judge(composition_set(world, 40), 2, epochs=6, batch_size=32, progress=False)
    held_out = composition_set(world, 10, start=1000, seed=1)
    val = validate_composition_judge(judge, held_out)
    assert set(val) == {"count", "scene", "facing", "species"}
    assert val["scene"] >= 0.8, val  # the background is the easiest truth (chance: 20 %)
    probs = judge.probabilities(held_out.images)
    assert probs["count"].shape == (20, 3) and np.allclose(probs["scene"].sum(1), 1, atol=1e-5)


def test_wrong_input_shape_is_refused(world):
    with pytest.raises(ValueError, match=r"images must be \(N, 3, 32, 32\)"):
        CompositionJudge(32, 2)(torch.zeros(1, 3, 16, 16))
