"""to_tensors / toy data / the world -> tensors (concept_grounding.models.data)."""

import numpy as np
import pytest
import torch

from concept_grounding import load_vocabulary
from concept_grounding.models.data import (
    TOY_COLOURS,
    ConceptTensors,
    to_tensors,
    toy_concept_dataset,
)


@pytest.fixture(scope="module")
def toy():
    return toy_concept_dataset(n_per_class=3, image_size=16, seed=1)


def test_to_tensors_shapes_values_and_names(toy):
    vocab = load_vocabulary()
    names = [f"has_primary_color::{c}" for c in TOY_COLOURS]
    t = to_tensors(toy, names, image_size=24)
    images, concepts, labels = t  # unpacks as a triple
    assert images.shape == (12, 3, 24, 24) and images.dtype == torch.float32
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0
    assert concepts.shape == (12, 4) and labels.dtype == torch.long
    # class k has colour k: the concept matrix is the one-hot of the label
    assert torch.equal(concepts, torch.nn.functional.one_hot(labels, 4).float())
    assert t.concept_names == tuple(names)
    assert t.concept_indices == tuple(vocab.attribute_index(n) for n in names)
    assert t.num_classes == 4 and t.class_names == tuple(vocab.classes[:4])


def test_square_pixels_carry_the_concept_colour(toy):
    t = to_tensors(toy, None, image_size=16)
    row = toy[0]
    x, y, w, h = (int(v) for v in row["bbox"])
    pixel = t.images[0, :, y + h // 2, x + w // 2]
    assert torch.allclose(pixel, torch.tensor(TOY_COLOURS["red"]) / 255.0)
    assert t.concepts.shape == (12, 312)


def test_class_label_source_reads_class_attributes(toy):
    ds = toy.map(lambda r: {"attributes": [0] * 312})  # per-image labels wiped
    assert float(to_tensors(ds, None, 16, "image").concepts.sum()) == 0
    assert float(to_tensors(ds, None, 16, "class").concepts.sum()) == 12


def test_missing_columns_and_bad_arguments_are_clear_errors(toy):
    with pytest.raises(ValueError, match=r"missing column\(s\) \['attributes'\]"):
        to_tensors(toy.remove_columns("attributes"), None, 16)
    with pytest.raises(ValueError, match="class_attributes"):
        to_tensors(toy.remove_columns("class_attributes"), None, 16, label_source="class")
    with pytest.raises(ValueError, match="label_source"):
        to_tensors(toy, None, 16, label_source="both")
    import datasets

    with pytest.raises(ValueError, match="DatasetDict"):
        to_tensors(datasets.DatasetDict({"train": toy}), None, 16)
    with pytest.raises(KeyError, match="unknown attribute"):
        to_tensors(toy, ["has_crown_color::tartan"], 16)


def test_concept_tensors_validates_shapes():
    with pytest.raises(ValueError, match="concepts must be"):
        ConceptTensors(torch.zeros(2, 3, 4, 4), torch.zeros(3, 1), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="concept_names has 2"):
        ConceptTensors(torch.zeros(2, 3, 4, 4), torch.zeros(2, 1), torch.zeros(2, dtype=torch.long), (0,), ("a", "b"))


def test_tiny_world_to_tensors():
    import concept_grounding.world as world_mod

    world = world_mod.BirdWorld(world_mod.WorldConfig(image_size=64, class_names=("017.Cardinal", "073.Blue_Jay")))
    dd = world.to_dataset_dict(2, 1)
    t = to_tensors(dd["train"], "cbm_112", image_size=32)
    assert t.images.shape == (4, 3, 32, 32) and t.concepts.shape == (4, 112)
    expected = np.asarray(dd["train"]["attributes"], dtype=np.float32)[:, list(load_vocabulary().cbm_112)]
    assert np.array_equal(t.concepts.numpy(), expected)
    assert set(t.labels.tolist()) == {0, 1}
