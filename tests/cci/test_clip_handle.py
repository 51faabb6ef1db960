"""The one CLIP handle (concept_grounding.models.clip.ClipHandle): the same object serves SUB
group scoring, CCI / COVAR and the Space, with one pixel normalisation."""

import numpy as np
import pytest
import torch

from concept_grounding.models.clip import ClipHandle, clip_group_scores, load_clip
from concept_grounding.models.pixels import PIXEL_MEAN, PIXEL_STD, normalize_pixels
from concept_grounding.testing import tiny_clip_handle, tiny_world_clip


@pytest.fixture(scope="module")
def world_handle():
    return tiny_clip_handle(image_size=16, seed=0)


def _images(n=3, size=16, seed=0):
    return list(np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8))


def test_normalize_pixels_maps_unit_range_to_minus_two_two():
    assert (PIXEL_MEAN, PIXEL_STD) == (0.5, 0.25)
    assert normalize_pixels(torch.tensor([0.0, 0.25, 1.0])).tolist() == [-2.0, -1.0, 2.0]


def test_world_clip_normalises_inside_with_the_one_function(world_handle):
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    model = world_handle.model
    with torch.no_grad():
        assert torch.equal(model.encode_image(x), model.clip.encode_image(normalize_pixels(x)))


def test_handle_pixels_are_the_inner_towers_input(world_handle):
    """CCI runs the world CLIP's inner open_clip tower: pixels() = normalise(preprocess(PIL))."""
    from PIL import Image

    images = _images()
    px = world_handle.pixels(images)
    unit = world_handle.preprocess([Image.fromarray(im) for im in images])
    assert px.shape == (3, 3, 16, 16) and float(unit.min()) >= 0 and float(unit.max()) <= 1
    assert torch.equal(px, (unit - 0.5) / 0.25)
    with torch.no_grad():  # the tower on pixels() is the whole model on [0, 1] input
        assert torch.allclose(
            world_handle.model.clip.encode_image(px), world_handle.model.encode_image(unit), atol=1e-6
        )


def test_text_views_agree(world_handle):
    texts = ["a photo of a bird", "a photo of a bird with a black crown"]
    raw = world_handle.encode_text(texts)
    unit = world_handle.encode_texts(texts)
    assert raw.shape == unit.shape == (2, world_handle.model.clip.text_projection.shape[1])
    assert torch.allclose(torch.nn.functional.normalize(raw, dim=-1), unit, atol=1e-6)
    assert not torch.allclose(raw.norm(dim=-1), torch.ones(2))  # raw really is unnormalised


def test_one_handle_for_sub_scoring_and_cci(world_handle):
    from PIL import Image

    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.evaluation import OpenVocabularyModel, as_sub_model
    from concept_grounding.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    pil = [Image.fromarray(im) for im in _images()]
    sub = as_sub_model(world_handle)
    assert isinstance(sub, OpenVocabularyModel) and sub.clip.model is world_handle.model
    sub.prepare(["crown_color"], vocab)
    scores, _ = sub.scores(pil)
    expected = clip_group_scores(
        world_handle.model, world_handle.tokenizer, pil, "crown_color", vocab, preprocess=world_handle.preprocess
    )
    assert torch.allclose(scores, expected, atol=1e-6)

    cci = ConceptClusterImportance(world_handle.model, num_clusters=3, seed=0)
    out = cci(world_handle.pixels(_images(2)), world_handle.encode_text(["a photo of a bird"]))
    assert out.maps.shape == (2, 16, 16) and torch.isfinite(out.maps).all()


def test_loaders_return_the_handle(tmp_path):
    from concept_grounding.cci.loading import load_explainable_clip
    from concept_grounding.models.clip.preprocess import to_pixel_values

    tiny_world_clip(image_size=16).save_pretrained(tmp_path / "clip")
    loaded = load_clip(tmp_path / "clip")
    named = load_explainable_clip(str(tmp_path / "clip"), image_size=16)
    for handle in (loaded, named):
        assert isinstance(handle, ClipHandle) and handle.backend.name == "world"
        assert handle.description == f"world model {tmp_path / 'clip'}"
    images = _images()
    assert torch.equal(loaded.pixels(images), named.pixels(images))

    default = load_explainable_clip(None, image_size=32)  # no random weights unless asked for by name
    assert (
        default.backend.name == "world" and not default.random_weights and "shipped world CLIP" in default.description
    )
    tiny = load_explainable_clip("random-clip", image_size=32)
    assert isinstance(tiny, ClipHandle) and tiny.backend.name == "open_clip" and tiny.random_weights
    assert "RANDOM weights" in tiny.description
    images = _images(2, 40)
    assert torch.equal(tiny.pixels(images), to_pixel_values(images, (32, 32)))


def test_bad_backend_is_a_clear_error(world_handle):
    with pytest.raises(ValueError, match="backend must be one of"):
        ClipHandle(world_handle.model, world_handle.tokenizer, world_handle.preprocess, "jax")
    with pytest.raises(ValueError, match="no tokenizer"):
        ClipHandle(world_handle.model, None, world_handle.preprocess, "world").encode_text(["a bird"])


def test_cci_takes_the_handle_itself():
    """CCI's backend picker accepts the one CLIP handle and explains the model it carries."""
    from concept_grounding.cci.backends import OpenCLIPBackend, get_backend
    from concept_grounding.testing import tiny_clip_handle

    handle = tiny_clip_handle()
    backend = get_backend(handle)
    assert isinstance(backend, OpenCLIPBackend)
    assert type(get_backend(handle.model)) is type(backend)
