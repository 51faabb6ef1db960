"""The composition CLIP: captions and positives from the world's truth, and the shipped model's
known answers on held-out compositions of species it never saw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from concept_grounding.conceptbed.composition_clip import (
    CompositionCaptioner,
    composition_clip_data,
    composition_texts,
    load_composition_clip,
    validate_composition_clip,
)
from concept_grounding.conceptbed.compositions import clip_scores, questions
from concept_grounding.models.clip import WordTokenizer
from concept_grounding.vocabulary import load_vocabulary
from concept_grounding.world import BirdWorld, WorldConfig
from concept_grounding.world.composition import ACTIONS, COUNT_WORDS, RELATIONS
from concept_grounding.world.config import SCENES


@pytest.fixture(scope="module")
def world():
    return BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal", "073.Blue_Jay")))


def test_tokenizer_knows_every_composition_word(world):
    tok = WordTokenizer.from_vocabulary(world.vocab, extra_texts=composition_texts(world))
    ids = tok(
        [
            "a photo of two bird in the sky",
            "a photo of a bird on a branch facing left",
            "a photo of three bird by the water facing right",
        ]
    )
    assert (ids != 1).all()  # no unknown word
    assert (WordTokenizer.from_vocabulary(world.vocab)(["a photo of two bird in the sky"]) == 1).any()


def test_captions_name_the_truth_and_positives_are_every_image_that_shows_it(world):
    data = composition_clip_data(world, 12, 2)
    captioner = CompositionCaptioner(
        data.class_names, {}, class_rate=0.0, attribute_rate=0.0, relation_rate=1.0, action_rate=1.0
    )
    torch.manual_seed(0)
    captions, positives = captioner(data.tensors())
    for j, caption in enumerate(captions):
        asked = {q.kind: q.value for q in questions(caption)}
        assert asked.get("count", 1) == data.count[j] and asked["facing"] == tuple(ACTIONS)[data.facing[j]]
        assert asked.get("scene") == (SCENES[data.scene[j]] if SCENES[data.scene[j]] in RELATIONS else None)
    plain = data.scene == SCENES.index("plain")  # a canonical render's caption names no relation
    same = (
        (data.count[:, None] == data.count)
        & ((data.scene[:, None] == data.scene) | plain[None, :])
        & (data.facing[:, None] == data.facing)
    )
    assert plain.sum() == 4 and not same.all()
    assert torch.equal(positives, same) and positives.diagonal().all()
    # the species, when named, narrows the positives to its images
    named = CompositionCaptioner(
        data.class_names, {}, class_rate=1.0, attribute_rate=0.0, relation_rate=0.0, action_rate=0.0
    )(data.tensors())[1]
    assert torch.equal(named, (data.count[:, None] == data.count) & (data.labels[:, None] == data.labels))


@pytest.fixture(scope="module")
def held_out():
    """Compositions of species the shipped CLIP never saw, samples past its validation's."""
    others = tuple(c for c in load_vocabulary().classes if c not in BirdWorld(WorldConfig(image_size=32)).class_names)
    return composition_clip_data(BirdWorld(WorldConfig(image_size=32, class_names=others[::8])), 6, 0, 20_000, 7)


def test_shipped_clip_ranks_the_true_caption_first_well_above_chance(held_out):
    torch.set_num_threads(1)
    val = validate_composition_clip(load_composition_clip(), held_out)
    assert set(val) == {"count", "relation", "action"}
    for category, v in val.items():
        assert v["accuracy"] >= v["chance"] + 0.25 and v["clip_gap"] > 1.0, (category, v)


def test_shipped_clip_scores_the_true_prompt_above_a_wrong_one(held_out):
    """Table 2's own CLIPScore (:func:`clip_scores`) on exact drawings: the true composite prompt
    ('a photo of two bird in the sky') beats the one with the count and the scene swapped."""
    clip = load_composition_clip()
    images = (held_out.images.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
    keep = (held_out.scene < len(RELATIONS)).numpy()
    relations, counts = list(RELATIONS.values()), list(COUNT_WORDS.values())

    def prompt(count: int, scene: int) -> str:
        return f"a photo of {counts[count - 1]} V* {relations[scene]}"

    true = [prompt(int(c), int(s)) for c, s in zip(held_out.count, held_out.scene)]
    wrong = [prompt(int(c) % 3 + 1, (int(s) + 1) % len(relations)) for c, s in zip(held_out.count, held_out.scene)]
    true_scores = clip_scores(clip, images[keep], list(np.array(true)[keep]))
    wrong_scores = clip_scores(clip, images[keep], list(np.array(wrong)[keep]))
    assert true_scores.mean() > wrong_scores.mean() + 2.0 and (true_scores > wrong_scores).mean() > 0.7
