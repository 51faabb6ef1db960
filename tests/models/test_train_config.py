"""One TrainConfig carries the training knobs: the trainers read it instead of their loose
arguments, and give the same weights as the same values passed one by one."""

import pytest
import torch

from concept_grounding.models import train_cbm, train_cem
from concept_grounding.models.training import TrainConfig


def _same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("mode", ["joint", "independent"])
def test_train_cbm_reads_the_config_like_its_loose_arguments(toy_concepts, mode):
    knobs = TrainConfig(epochs=2, seed=5, batch_size=16, lr=1e-2, progress=False)
    from_config = train_cbm(toy_concepts, mode=mode, train=knobs)
    loose = train_cbm(toy_concepts, mode=mode, epochs=2, seed=5, batch_size=16, lr=1e-2, progress=False)
    assert _same_weights(from_config, loose)
    image_side = "joint" if mode == "joint" else "concepts"
    assert len(from_config.history[image_side].losses) == 2


def test_a_knob_given_both_ways_is_refused_and_none_keeps_the_trainers_default(toy_concepts):
    with pytest.raises(ValueError, match="^epochs, seed given both loose and in train="):
        train_cem(toy_concepts, epochs=7, seed=1, train=TrainConfig(epochs=1, seed=2, progress=False))
    with pytest.raises(ValueError, match="^progress given both loose and in train="):
        train_cem(toy_concepts, progress=False, train=TrainConfig(epochs=1))
    model = train_cem(toy_concepts, train=TrainConfig(epochs=1, seed=2, progress=False))
    assert len(model.history["joint"].losses) == 1
    explicit_lr = train_cem(toy_concepts, epochs=1, seed=2, lr=3e-3, progress=False)
    assert _same_weights(model, explicit_lr)  # lr None in the config keeps train_cem's 3e-3


def test_an_explicit_progress_false_is_never_overridden(toy_concepts, monkeypatch):
    """``progress=False`` beside a config's default ``True`` drew bars."""
    from concept_grounding.models import training

    shown = []
    real_fit = training.fit

    def spy(*args, progress=True, **kwargs):
        shown.append(progress)
        return real_fit(*args, progress=progress, **kwargs)

    monkeypatch.setattr("concept_grounding.models.cem.fit", spy)
    train_cem(toy_concepts, epochs=1, progress=False)
    train_cem(toy_concepts, train=TrainConfig(epochs=1, progress=False))
    assert shown == [False, False]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(epochs=0), "epochs must be >= 1"),
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(lr=0.0), "lr must be > 0"),
        (dict(threads=0), "threads must be >= 1"),
    ],
)
def test_bad_knobs_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_bench_config_hands_its_knobs_on():
    from concept_grounding.bench import BenchConfig
    from concept_grounding.world import WorldConfig

    assert BenchConfig(WorldConfig(seed=4), epochs=3, threads=2).train == TrainConfig(epochs=3, seed=4, threads=2)
