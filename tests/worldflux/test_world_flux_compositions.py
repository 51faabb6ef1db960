"""train-flux --compositions: composition renders with their truth, captions that name it."""

import json

import numpy as np

from concept_grounding.world import BirdWorld
from concept_grounding.worldflux.components import FluxTrainConfig
from concept_grounding.worldflux.data import batch_captions, composition_counts


def test_tiny_training_with_compositions(tmp_path):
    from concept_grounding.cli import main

    out, work = tmp_path / "out", tmp_path / "work"
    assert (
        main(
            [
                "train-flux",
                "--tiny",
                "--compositions",
                "0.5",
                "--out",
                str(out),
                "--work-dir",
                str(work),
                "--no-progress",
            ]
        )
        == 0
    )
    with np.load(work / "data.npz") as z:
        data = {k: z[k] for k in z.files}
    composed = data["composed"]
    assert composed.sum() == 2 * 2 and (~composed).sum() == 2 * 4  # tiny: 2 classes x (4 + round(4 * 0.5))
    assert set(data["scene"][~composed]) == {"plain"} and set(data["facing"][~composed]) == {"right"}
    assert (data["count"][~composed] == 1).all()
    assert (data["count"][composed] == composition_counts(0, data["indices"][composed].tolist())).all()
    vocab = json.loads((out / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    assert {"two", "three", "sky", "facing"} <= set(vocab)
    log = json.loads((out / "train_log.json").read_text())
    assert FluxTrainConfig.from_dict(log["config"]).compositions == 0.5


def test_captions_of_mirrored_compositions_name_the_mirrored_facing():
    cfg = FluxTrainConfig(compositions=1.0, caption_dropout=0.0)
    world = BirdWorld(cfg.world)
    n = 4
    data = {
        "attributes": np.stack([world.labels(i) for i in range(n)]),
        "labels": np.arange(n) % world.num_classes,
        "composed": np.array([False, True, True, True]),
        "count": np.array([1, 1, 2, 3]),
        "scene": np.array(["plain", "water", "sky", "reeds"]),
        "facing": np.array(["right", "left", "left", "left"]),
    }
    rng = np.random.default_rng(0)
    for _ in range(30):
        caps = batch_captions(data, [0, 1, 2, 3], [False, True, False, True], world, rng, cfg)
        assert not any(w in caps[0] for w in ("facing", "two", "three", "water"))  # a canonical render: no composition
        assert "facing left" not in caps[1] and "facing right" not in caps[2]
        assert "two" in caps[2].split() and "three" in caps[3].split()


def test_old_configs_read_without_compositions():
    d = FluxTrainConfig().to_dict()
    assert "compositions" not in d  # files of earlier runs are unchanged
    assert FluxTrainConfig.from_dict(d).compositions == 0.0
    assert FluxTrainConfig(compositions=0.5).mirror_augment  # only the compositions are mirrored in training
