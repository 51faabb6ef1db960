"""ConceptBed's adapter over the learners: its defaults are the learners' one table, and a fitted
learner generates images of V*."""

from __future__ import annotations

import numpy as np

from concept_grounding.conceptbed.concepts import Concept
from concept_grounding.conceptbed.learners import FLUX_LEARNERS, FluxLearner
from concept_grounding.learners import METHODS, LearnConfig


def test_the_adapter_defaults_are_the_method_table(monkeypatch, tmp_path):
    from concept_grounding import learners

    seen = []
    monkeypatch.setattr(learners, "learn", lambda config, out: seen.append(config) or out)
    monkeypatch.setattr(learners, "load_learned", lambda pipe, folder: pipe)
    monkeypatch.setattr(FluxLearner, "base_pipeline", lambda self: None)
    concept = Concept("object", "c", 0, np.zeros((2, 32, 32, 3), np.uint8), np.zeros((2, 32, 32, 3), np.uint8))
    for name, method in FLUX_LEARNERS.items():
        FluxLearner(name).fit(concept, tmp_path / method)
        config = seen[-1]
        cls = METHODS[method]
        assert config.resolved_steps() == cls.steps and config.resolved_lr() == cls.world_lr
        direct = LearnConfig(method=method, images="x")  # `learn` on the world Flux: the same defaults
        assert (direct.resolved_steps(), direct.resolved_lr()) == (cls.steps, cls.world_lr)


def test_a_fitted_lora_generates_images_of_the_asked_size(concept_dir, tmp_path):
    from concept_grounding.learners.data import load_images

    images = load_images(concept_dir)
    concept = Concept("object", "albatross", 0, images, images[:2])
    learner = FluxLearner("LoRA", steps=2, batch=2, inference_steps=2)
    learner.fit(concept, tmp_path)
    out = learner.generate(["a photo of V*"], 3, seed=0)
    assert out.shape == (3, 32, 32, 3) and out.dtype == np.uint8
    assert (tmp_path / "learned" / "pytorch_lora_weights.safetensors").is_file()
