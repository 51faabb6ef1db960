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
    trainer, _ = tiw.prepare_variant(pipe, tiw.Variant("scaled", lr=1e-2, per_table_lr=True, steps=1), images)
    tables = tiw.embedding_tables(pipe)
    clip_lr, t5_lr = (group["lr"] for group in trainer.optimizer.param_groups)
    assert t5_lr == 1e-2
    assert clip_lr == pytest.approx(1e-2 * tables["text_encoder"]["rms"] / tables["text_encoder_2"]["rms"])
    assert clip_lr < t5_lr / 10  # the world's CLIP rows are ~50x smaller than its T5 rows


def test_lora_alone_trains_no_row(images):
    pipe = tiw.load_world_pipeline()
    trainer, latents = tiw.prepare_variant(pipe, tiw.Variant("lora", rows=False, lora_rank=2, steps=2), images)
    assert [group["lr"] for group in trainer.optimizer.param_groups] == [1e-3]  # the adapters alone
    record = tiw.train_variant(trainer, latents, steps=2, every=1)
    assert len(record["losses"]) == 2
    assert all(r[enc]["moved"] == 0.0 for r in record["trace"] for enc in ("text_encoder", "text_encoder_2"))
    assert SimpleNamespace(**record["trace"][-1]).text_encoder["nearest"] == "bird"


def _part(index, concept, accuracy):
    """One run's record as ``main`` writes it (only what ``merge`` and ``results_markdown`` read)."""
    row = {"norm": 1.0, "moved": 0.5, "grad": 0.1, "nearest": "bird", "cosine": 0.9}
    verdict = {"accuracy": accuracy, "p_concept": accuracy, "classed_learnt": 0.0, "top": [[concept, 16]]}
    prompt = "a photo of <v*>"
    return {
        "index": index,
        "concept": concept,
        "variant": {"name": f"v{index}"},
        "training": {"losses": [5.0, 4.0], "trace": [{"step": 2, "text_encoder": row, "text_encoder_2": row}]},
        "verdicts": {f"before {prompt}": {**verdict, "accuracy": 0.0}, f"after {prompt}": verdict},
    }


def test_merge_joins_parts_in_run_order_and_tabulates_them(tmp_path):
    import json

    image = np.zeros((8, 4, 4, 3), np.uint8)
    for stem, runs in {"p1": [_part(2, "b", 1.0)], "p2": [_part(0, "a", 0.5), _part(3, "a", 0.25)]}.items():
        (tmp_path / f"{stem}.json").write_text(json.dumps({"runs": runs, "tables": {}}))
        arrays = {f"train|{r['concept']}": image for r in runs}
        arrays |= {f"{r['index']}|{when} a photo of <v*>": image for r in runs for when in ("before", "after")}
        np.savez(tmp_path / f"{stem}.npz", **arrays)
    (tmp_path / "named.json").write_text(json.dumps({"runs": [], "named_learnt_species": {"x": 1}}))
    merged = tiw.merge(tmp_path, ["named", "p1", "p2"], "all")
    assert [r["index"] for r in merged["runs"]] == [0, 2, 3]
    assert merged["named_learnt_species"] == {"x": 1}
    assert (tmp_path / "all.png").is_file()
    table = tiw.results_markdown(merged).splitlines()
    assert len(table) == 5 and "| a | v0 | 0.00 -> 0.50 |" in table[2]


def test_the_pooled_clip_output_and_the_t5_states_see_v_star(images):
    """The world CLIP pools at its first <eos> (eos id 3), after V*: the pooled vector alone carries a
    gradient to V*'s CLIP row, and the T5 states one to its T5 row (the hook on T5's shared table fires)."""
    from concept_grounding.worldflux.objective import encode_prompts

    pipe = tiw.load_world_pipeline()
    trainer, _ = tiw.prepare_variant(pipe, tiw.Variant("base", steps=1), images)
    encoders = (pipe.text_encoder, pipe.text_encoder_2)
    states, pooled = encode_prompts((pipe.tokenizer, pipe.tokenizer_2), encoders, ["a photo of <v*>"], 24)
    pooled.square().sum().backward(retain_graph=True)
    assert trainer.rows["text_encoder"].grad.norm() > 1e-3
    assert trainer.rows["text_encoder_2"].grad is None  # the pooled vector is CLIP's alone
    states.square().sum().backward()
    assert trainer.rows["text_encoder_2"].grad.norm() > 1e-3
    assert pipe.text_encoder_2.encoder.embed_tokens is pipe.text_encoder_2.shared


def test_a_saved_and_reloaded_v_star_draws_the_same_images(images):
    """What conceptbed generates from (the method's own files, read by ``load_learned``) is the trained, hooked V*."""
    pipe = tiw.load_world_pipeline()
    trainer, latents = tiw.prepare_variant(pipe, tiw.Variant("base", lr=5e-2, steps=2), images)
    tiw.train_variant(trainer, latents, steps=2)
    settings = tiw.GenerationSettings(n=2, steps=2)
    drawn = tiw.generate(pipe, "a photo of <v*>", settings)
    assert tiw.loader_roundtrip(trainer, "a photo of <v*>", settings, drawn) == 0.0
    untrained = tiw.generate(tiw.load_world_pipeline(), "a photo of a bird", settings)
    assert np.abs(untrained.astype(int) - drawn.astype(int)).max() > 0  # the check can fail


def test_pivotal_tuning_trains_rows_and_adapters_at_their_own_rates(images):
    pipe = tiw.load_world_pipeline()
    variant = tiw.Variant("pivotal", lora_rank=2, lora_lr=1e-3, steps=2)
    trainer, latents = tiw.prepare_variant(pipe, variant, images)
    assert isinstance(trainer.method, tiw.PivotalTuning)
    assert [group["lr"] for group in trainer.optimizer.param_groups] == [5e-3, 5e-3, 1e-3]
    lora = trainer.optimizer.param_groups[2]["params"]
    start = [p.detach().clone() for p in lora]
    record = tiw.train_variant(trainer, latents, steps=2, every=1)
    last = record["trace"][-1]
    assert all(last[enc]["moved"] > 0 and last[enc]["grad"] > 0 for enc in ("text_encoder", "text_encoder_2"))
    assert any((p.detach() - s).abs().max() > 0 for p, s in zip(lora, start))
