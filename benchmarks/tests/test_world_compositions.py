"""Composition rates: an exact generator scores 1, a generator that ignores the category scores 0,
and a head below the bar gives no rate."""

import numpy as np
import pytest
import torch
from experiments import world_compositions as wc

from concept_grounding.judge.base import as_image_array, to_unit
from concept_grounding.judge.composition import HEADS
from concept_grounding.world import BirdWorld, WorldConfig
from concept_grounding.world.composition import COUNT_WORDS, RELATIONS


@pytest.fixture(scope="module")
def world():
    return BirdWorld(WorldConfig(image_size=32, class_names=("073.Blue_Jay",)))


class TruthJudge(torch.nn.Module):
    """A 'judge' that knows what every image it is shown was drawn as (keyed by its pixels)."""

    def __init__(self, truth):
        super().__init__()
        self.truth = truth

    def forward(self, images):
        keys = [np.rint(im.permute(1, 2, 0).numpy() * 255).astype(np.uint8).tobytes() for im in images]
        out = {}
        for head, values in {**HEADS, "species": (0,)}.items():
            onehot = torch.zeros(len(keys), len(values))
            for n, k in enumerate(keys):
                onehot[n, self.truth[k][head]] = 1.0
            out[head] = onehot * 50
        return out

    def probabilities(self, images):
        """The judge protocol: head -> (N, values) softmax on uint8 (N, S, S, 3) images."""
        return {k: v.softmax(-1).numpy() for k, v in self(to_unit(as_image_array(images))).items()}


def fake_generator(world, truth, obey=True):
    """prompting_images that draws the world composition each prompt asks (``obey``) or a lone bird."""
    words = {v: k for k, v in COUNT_WORDS.items()}

    def generate(pipe, prompts, seeds, **kw):
        images = []
        for p, seed in zip(prompts, seeds):
            count = words[p.split()[3]] if obey else 1
            scene = next((s for s, r in RELATIONS.items() if r in p), None) if obey else None
            facing = "left" if obey and "facing left" in p else "right" if obey and "facing right" in p else None
            i = next(
                i
                for i in range(seed, seed + 500)
                if (scene is None or world.sample(i).pose.background_name == scene)
                and (facing is None or world.sample(i).pose.facing == facing)
            )
            c = world.composition(i, count)
            truth[c.image.tobytes()] = {
                "count": c.count - 1,
                "scene": HEADS["scene"].index(c.scene),
                "facing": HEADS["facing"].index(c.facing),
                "species": 0,
            }
            images.append(c.image.astype(np.float32) / 255)
        return images

    return generate


@pytest.mark.parametrize("obey", [True, False])
def test_rates_of_an_exact_and_of_a_deaf_generator(world, monkeypatch, obey):
    import concept_grounding.tdg.baseline as baseline

    truth = {}
    monkeypatch.setattr(baseline, "prompting_images", fake_generator(world, truth, obey))
    result = wc.measure_compositions(
        None,
        world,
        TruthJudge(truth),
        dict.fromkeys(("count", "scene", "facing", "species"), 1.0),
        {},
        images_per_prompt=1,
    )
    rates = {k: v["rate"] for k, v in result["categories"].items()}
    if obey:
        assert rates == {"counting": 1.0, "relation": 1.0, "action": 1.0, "composite": 1.0}
    else:  # always one bird: counting never right; a scene only by chance of the drawn sample
        assert rates["counting"] == 0.0 and rates["composite"] == 0.0
    assert result["species"] == 1.0
    assert "Judge validation" in wc.compositions_markdown(result)


def test_a_head_below_the_bar_gives_no_rate(world, monkeypatch):
    import concept_grounding.tdg.baseline as baseline

    truth = {}
    monkeypatch.setattr(baseline, "prompting_images", fake_generator(world, truth))
    val = {"count": 0.5, "scene": 1.0, "facing": 1.0, "species": 0.9}
    result = wc.measure_compositions(None, world, TruthJudge(truth), val, {}, images_per_prompt=1)
    cats = result["categories"]
    assert cats["counting"]["rate"] is None and cats["composite"]["rate"] is None and cats["relation"]["rate"] == 1.0
    assert result["species"] is None
    assert "| counting | 2 | - | - |" in wc.compositions_markdown(result)
