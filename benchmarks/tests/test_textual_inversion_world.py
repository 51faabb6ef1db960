"""The Textual Inversion experiment's measurements: the oracle's verdict on known scores, V* one token in
both world tokenizers, each encoder's rate scaled by its table, and LoRA alone leaving V* where it started."""

from types import SimpleNamespace

import numpy as np
import pytest
from experiments import textual_inversion_world as tiw

from concept_grounding.world import BirdWorld, WorldConfig


class FixedOracle:
    """An oracle whose (N, K) scores are given."""

    def __init__(self, probs, names):
        self.probs, self.names = np.asarray(probs, float), names

    def scores(self, images):
        return self.probs


def test_species_verdict_counts_the_concept_and_the_learnt_species():
    names = ("a", "b", "c")
    oracle = FixedOracle([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.1, 0.6, 0.3], [0.2, 0.1, 0.7]], names)
    verdict = tiw.species_verdict(oracle, np.zeros((4, 2, 2, 3), np.uint8), label=0, learnt={"b"})
    assert verdict["accuracy"] == 0.25
    assert verdict["p_concept"] == pytest.approx(0.275)
    assert verdict["classed_learnt"] == 0.5
    assert verdict["top"][0] == ["b", 2]


@pytest.fixture(scope="module")
def images():
    world = BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal",), pose="canonical", scene="plain"))
    return np.stack([world.sample(i).image for i in range(4)])


def test_v_star_is_one_token_of_both_world_tokenizers(images):
    pipe = tiw.load_world_pipeline()
    tiw.prepare_variant(pipe, tiw.Variant("base", steps=1), images)
    tokens = tiw.tokenisation(pipe, "a photo of <v*>")
    assert tokens["tokenizer"]["tokens"] == ["<bos>", "a", "photo", "of", "<v*>", "<eos>"]
    assert all(t["v_star_one_token"] for t in tokens.values())


def test_per_table_rate_scales_each_row_by_its_table(images):
    pipe = tiw.load_world_pipeline()
    learner, _ = tiw.prepare_variant(pipe, tiw.Variant("scaled", lr=1e-2, per_table_lr=True, steps=1), images)
    tables = tiw.embedding_tables(pipe)
    clip_lr, t5_lr = (group["lr"] for group in learner.optimizer.param_groups)
    assert t5_lr == 1e-2
    assert clip_lr == pytest.approx(1e-2 * tables["text_encoder"]["rms"] / tables["text_encoder_2"]["rms"])
    assert clip_lr < t5_lr / 10  # the world's CLIP rows are ~50x smaller than its T5 rows


def test_lora_alone_trains_no_row(images):
    pipe = tiw.load_world_pipeline()
    learner, latents = tiw.prepare_variant(pipe, tiw.Variant("lora", rows=False, lora_rank=2, steps=2), images)
    record = tiw.train_variant(learner, latents, steps=2, every=1)
    assert len(record["losses"]) == 2
    assert all(r[enc]["moved"] == 0.0 for r in record["trace"] for enc in ("text_encoder", "text_encoder_2"))
    assert SimpleNamespace(**record["trace"][-1]).text_encoder["nearest"] == "bird"
