"""Saved concept models load by their config, and serve as the TDG filter's attribute judge."""

import numpy as np
import pytest
from PIL import Image

from concept_grounding.judge import create_judge
from concept_grounding.models import train_cbm, train_cem
from concept_grounding.models.data import to_tensors, toy_concept_dataset
from concept_grounding.models.loading import load_concept_model


@pytest.fixture(scope="module")
def toy():
    ds = toy_concept_dataset(n_per_class=4, image_size=16)
    concepts = [i for i, v in enumerate(np.asarray(ds["attributes"]).any(axis=0)) if v]
    return to_tensors(ds, concepts, image_size=16)


@pytest.mark.parametrize("train", [train_cbm, train_cem])
def test_load_by_config_and_oracle(toy, train, tmp_path):
    model = train(toy, epochs=1, progress=False)
    model.save_pretrained(tmp_path / "m")
    loaded = load_concept_model(tmp_path / "m")
    assert type(loaded) is type(model)
    judge = create_judge("concept-model", path=tmp_path / "m", image_size=16)
    probs = judge.probabilities([Image.new("RGB", (20, 20), (220, 30, 30))] * 3)["attributes"]
    assert probs.shape == (3, 312)
    others = np.setdiff1d(np.arange(312), toy.concept_indices)
    assert np.all(probs[:, others] == 0.5) and np.all((probs >= 0) & (probs <= 1))


def test_not_a_concept_model(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        load_concept_model(tmp_path)
    (tmp_path / "config.json").write_text('{"words": []}')
    with pytest.raises(ValueError, match="not a CBM, CEM or post-hoc CBM"):
        load_concept_model(tmp_path)
