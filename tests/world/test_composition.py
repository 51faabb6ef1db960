"""Compositions: one bird is the sample itself; 2-3 birds keep the sample's truth, each bird's
pixels are its own, and captions name what was drawn."""

import numpy as np
import pytest
from scipy import ndimage

from concept_grounding.world import BirdWorld, WorldConfig
from concept_grounding.world.composition import ACTIONS, COUNT_WORDS, RELATIONS, CompositionPrompt, flock_poses
from concept_grounding.worldflux.captions import caption_vocabulary, compose_caption


@pytest.fixture(scope="module")
def world():
    return BirdWorld(WorldConfig(image_size=64))


def test_one_bird_is_the_sample_exactly(world):
    for i in range(6):
        s, c = world.sample(i), world.composition(i, 1)
        assert (c.image == s.image).all() and (c.mask == s.mask).all()
        assert (c.attributes == s.attributes).all() and (c.part_xy[0] == s.part_xy).all()
        assert (c.scene, c.facing, c.label) == (s.pose.background_name, s.pose.facing, s.label)


@pytest.mark.parametrize("count", [2, 3])
def test_several_birds_keep_the_truth_and_own_their_pixels(world, count):
    for i in range(8):
        c = world.composition(i, count)
        s = world.sample(i)
        assert c.count == count and c.bird_masks.shape == (count, 64, 64)
        assert (c.attributes == s.attributes).all() and c.scene == s.pose.background_name
        assert (c.bird_masks.sum(0) <= 1).all()  # no pixel belongs to two birds
        assert (c.bird_masks.any(0) == c.mask).all()
        assert all(m.sum() > 20 for m in c.bird_masks)  # every bird is seen
        # birds sit in left-to-right slots
        xs = [np.nonzero(m)[1].mean() for m in c.bird_masks]
        assert xs == sorted(xs)
    # deterministic
    assert (world.composition(3, count).image == world.composition(3, count).image).all()


@pytest.mark.parametrize("count", [2, 3])
def test_birds_do_not_touch_mostly(world, count):
    """The counting truth is visible: in most pictures no two birds touch (measured 95-98 %)."""
    apart = []
    for i in range(30):
        masks = world.composition(i, count).bird_masks
        grown = [ndimage.binary_dilation(m) for m in masks]
        apart.append(not any((grown[a] & masks[b]).any() for a in range(count) for b in range(count) if a != b))
    assert np.mean(apart) >= 0.85


def test_bad_count_is_refused(world):
    with pytest.raises(ValueError, match="count must be one of"):
        flock_poses(world.sample(0).pose, 4, 64, np.random.default_rng(0))


def test_compose_caption_names_what_was_drawn():
    rng = np.random.default_rng(0)
    for _ in range(200):
        count = int(rng.integers(1, 4))
        scene = str(rng.choice(list(RELATIONS)))
        facing = str(rng.choice(["left", "right"]))
        base = "a photo of a blue jay with a red crown" if rng.random() < 0.5 else "a photo of a blue jay"
        text = compose_caption(base, count, scene, facing, rng)
        assert ("two" in text.split()) == (count == 2) and ("three" in text.split()) == (count == 3)
        named = [p for p in (RELATIONS[scene], f"facing {facing}") if p in text]
        categories = len(named) + (count > 1) + (" with " in text)
        assert 1 <= categories <= 2, text  # ConceptBed composes at most two categories
        assert ("facing" in text) <= (f"facing {facing}" in text)  # never the wrong facing
    assert compose_caption("", 3, "sky", "left", rng) == ""  # a dropped caption stays dropped


@pytest.mark.parametrize("noun", ["V*", "bird", "blue jay", "chuck-will's-widow"])
def test_the_prompt_grammar_reads_back_what_it_writes(noun):
    for count in COUNT_WORDS:
        for attribute in (None, "a red crown", "the body of a blue jay and a beak like a cardinal"):
            for scene in (None, *RELATIONS):
                for facing in (None, *ACTIONS):
                    asked = CompositionPrompt(noun, count, attribute, scene, facing)
                    assert CompositionPrompt.parse(asked.text) == asked, asked.text
    assert (
        CompositionPrompt("V*", 3, "a red crown", "water", "right").text
        == "a photo of three V* with a red crown by the water facing right"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 4}, "count must be one of"),
        ({"scene": "plain"}, "scene must be one of"),
        ({"facing": "up"}, "facing must be one of"),
    ],
)
def test_the_prompt_grammar_refuses_what_the_world_cannot_draw(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CompositionPrompt("V*", **kwargs)


def test_every_composed_caption_is_in_the_prompt_grammar():
    """The world Flux's training captions and the prompts Table 2 asks are one grammar: each caption
    reads back as the count drawn and, where it names them, the scene and facing drawn."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        count, scene = int(rng.integers(1, 4)), str(rng.choice([*RELATIONS, "plain"]))
        facing = str(rng.choice(list(ACTIONS)))
        base = str(
            rng.choice(
                [
                    "a photo of a blue jay",
                    "a photo of a bird with a red crown",
                    "a photo of a blue jay with the body of a blue jay and a beak like a cardinal",
                ]
            )
        )
        asked = CompositionPrompt.parse(compose_caption(base, count, scene, facing, rng))
        assert asked is not None and asked.count == count
        assert asked.scene in (None, scene) and asked.facing in (None, facing)
    with pytest.raises(ValueError, match="does not start with"):
        compose_caption("two birds", 2, "sky", "left", rng)


def test_caption_vocabulary_has_the_composition_words_only_when_asked():
    world = BirdWorld(WorldConfig(image_size=32))
    plain, composed = set(caption_vocabulary(world)), set(caption_vocabulary(world, compositions=True))
    assert {"two", "three", "sky", "water", "facing", "left", "branch"} <= composed - plain
