"""The adapter layer of bring-your-own-model: concept names, preprocessing, structured
outputs, factory results, ``--model`` resolution, and a SigLIP built from config."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from PIL import Image

from concept_grounding.errors import UsageError
from concept_grounding.evaluation import BinaryConceptModel, as_sub_model, make_preprocess, resolve_concept_names
from concept_grounding.evaluation.adapters import pick_output
from concept_grounding.evaluation.loading import from_factory_result, load_factory, load_model
from concept_grounding.vocabulary import load_vocabulary


def _images(n=3, size=12):
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)) for _ in range(n)]


def test_concept_names_in_every_form():
    vocab = load_vocabulary()
    assert resolve_concept_names("cub_312") == vocab.attributes
    assert resolve_concept_names("sub") == tuple(vocab.sub_substitutions.values())
    assert resolve_concept_names([111], index_base="cbm_112") == (vocab.attributes[vocab.cbm_112[111]],)
    assert resolve_concept_names(["has_belly_pattern--striped", 0]) == (
        "has_belly_pattern::striped",
        vocab.attributes[0],
    )
    with pytest.raises(ValueError, match="index 112 is outside cbm_112"):
        resolve_concept_names([112], index_base="cbm_112")
    # CUB's own attribute ids (attributes.txt) are 1-based: an explicit choice
    assert resolve_concept_names([1, 312], index_base="cub_id") == (vocab.attributes[0], vocab.attributes[311])
    with pytest.raises(UsageError, match=r"index 0 is outside cub_id \(1\.\.312\)"):
        resolve_concept_names([0], index_base="cub_id")
    with pytest.raises(UsageError, match="1-based attribute ids .* need index_base='cub_id'"):
        resolve_concept_names([5, 312])
    with pytest.raises(ValueError, match="unknown named set"):
        resolve_concept_names("koh")
    with pytest.raises(ValueError, match="twice"):
        BinaryConceptModel(lambda x: x, ["has_crown_color::black", "has_crown_color--black"])


def test_preprocessing_kinds_agree_on_the_same_pixels():
    from torchvision import transforms
    from transformers import CLIPImageProcessor

    images = _images()
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    by_size = make_preprocess(size=12, mean=mean, std=std)(images)
    by_transform = make_preprocess(transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)]))(images)
    processor = CLIPImageProcessor(do_resize=False, do_center_crop=False, image_mean=list(mean), image_std=list(std))
    by_processor = make_preprocess(processor=processor)(images)
    assert by_size.shape == (3, 3, 12, 12)
    assert torch.allclose(by_size, by_transform, atol=1e-5) and torch.allclose(by_size, by_processor, atol=1e-4)
    assert make_preprocess()(images).max() <= 1.0  # [0, 1] by default
    with pytest.raises(ValueError, match="not several"):
        make_preprocess(transforms.ToTensor(), size=8)
    with pytest.raises(ValueError, match="3 values"):
        make_preprocess(mean=(0.5,))


def test_a_plain_module_must_state_its_normalisation():
    """No mean / std, transform or processor: refused, never fed [0, 1] pixels silently."""
    from torchvision import transforms

    net, names = torch.nn.Linear(3, 2), ["has_crown_color::black", "has_crown_color::blue"]
    with pytest.raises(UsageError) as err:
        BinaryConceptModel(net, names, size=8)
    assert str(err.value) == (
        "Linear comes with no preprocessing: pass mean= and std= (the normalisation it was "
        "trained with), transform= or processor=, or normalize=False to feed it [0, 1] pixels"
    )
    with pytest.raises(UsageError, match="normalize=False contradicts mean= / std="):
        BinaryConceptModel(net, names, size=8, mean=(0.5,) * 3, std=(0.5,) * 3, normalize=False)
    images = _images(1)
    assert BinaryConceptModel(net, names, size=12, normalize=False).preprocess(images).min() >= 0
    stated = BinaryConceptModel(net, names, size=12, mean=(0.5,) * 3, std=(0.25,) * 3).preprocess(images)
    assert torch.allclose(stated, (make_preprocess(size=12)(images) - 0.5) / 0.25)
    BinaryConceptModel(net, names, transform=transforms.ToTensor())  # a transform states its own
    with pytest.raises(UsageError, match="pass mean= and std="):
        as_sub_model(net, concept_names=names, image_size=8)


def test_factory_tuple_parts_are_told_apart_by_type():
    """(model, concept_names) used to be read as (model, transform)."""
    from torchvision import transforms

    net, names, to_tensor = (
        torch.nn.Linear(3, 2),
        ["has_crown_color::black", "has_crown_color::blue"],
        transforms.ToTensor(),
    )
    for result in (
        (net, names),
        (net, tuple(names)),
        (net, to_tensor, names),
        (net, names, to_tensor),
        (net, None, names),
    ):
        adapter = from_factory_result(result, normalize=False)  # read only without a transform
        assert adapter.concept_names == tuple(names) and adapter.model is net
    assert len(from_factory_result((net, "sub"), normalize=False).concept_names) == 32
    assert from_factory_result((net, [0, 1]), normalize=False).concept_names == load_vocabulary().attributes[:2]
    with pytest.raises(UsageError, match="items 1 and 2 after the model are both transform"):
        from_factory_result((net, to_tensor, to_tensor))
    with pytest.raises(UsageError, match="item 1 after the model is a float, neither concept names"):
        from_factory_result((net, 0.5))


@dataclasses.dataclass
class _Out:
    concepts: torch.Tensor
    classes: torch.Tensor


def test_structured_outputs_are_picked_by_key_or_index():
    c, k = torch.zeros(2, 3), torch.ones(2, 5)
    assert pick_output(_Out(c, k), "concepts") is c
    assert pick_output({"classes": k, "concepts": c}, "concepts") is c
    assert pick_output([k, c], 1) is c
    with pytest.raises(ValueError, match="no such part"):
        pick_output(_Out(c, k), "logits")
    with pytest.raises(ValueError, match="declare which part"):
        pick_output((c, k), None)


def test_probabilities_are_not_squashed_twice():
    names = ["has_crown_color::black", "has_crown_color::blue"]
    probs = torch.tensor([[0.2, 0.9]])
    as_probs = BinaryConceptModel(
        lambda x: probs.expand(len(x), -1), names, size=4, normalize=False, outputs="probabilities"
    )
    as_logits = BinaryConceptModel(lambda x: probs.expand(len(x), -1), names, size=4, normalize=False)
    assert torch.equal(as_probs.scores(_images(1))[0], probs)
    assert torch.allclose(as_logits.scores(_images(1))[0], torch.sigmoid(probs))


def test_factory_results_and_model_strings(tmp_path):
    net = torch.nn.Linear(3, 2)
    names = ["has_crown_color::black", "has_crown_color::blue"]
    adapter = from_factory_result({"model": net, "concept_names": names, "image_size": 8, "normalize": False})
    assert adapter.concept_names == tuple(names)
    adapter = from_factory_result((net, None, names), concept_names="sub", normalize=False)  # overrides win
    assert len(adapter.concept_names) == 32
    with pytest.raises(ValueError, match="only keys among"):
        from_factory_result({"model": net, "names": names})
    with pytest.raises(ValueError, match="concept_names="):
        as_sub_model(net)
    with pytest.raises(ValueError, match="expected 'file.py:factory'"):
        load_factory("no_colon_here")
    with pytest.raises(ValueError, match="no such file"):
        load_factory(str(tmp_path / "missing.py") + ":build")
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="no callable 'build'"):
        load_factory(str(tmp_path / "m.py") + ":build")
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ValueError, match="boom"):
        load_factory(str(tmp_path / "broken.py") + ":build")
    assert load_factory("concept_grounding.testing:tiny_open_clip").__name__ == "tiny_open_clip"
    with pytest.raises(ValueError, match="^--model: no such folder or file"):  # the one resolver, before loading
        load_model(str(tmp_path / "not-a-model"))


def test_project_model_folder_reads_its_bench_image_size(tmp_path):
    from concept_grounding.evaluation.loading import saved_image_size
    from concept_grounding.models import ConceptBottleneckModel

    run = tmp_path / "run"
    ConceptBottleneckModel(2, 2, concept_names=["has_crown_color::black", "has_crown_color::red"]).save_pretrained(
        run / "models" / "cbm"
    )
    assert saved_image_size(run / "models" / "cbm") == 64
    (run / "config.json").write_text(json.dumps({"image_size": 48}))
    assert saved_image_size(run / "models" / "cbm") == 48
    adapter = load_model(str(run / "models" / "cbm"))
    assert adapter.mode == "binary" and adapter.preprocess(_images(1, 20)).shape[-1] == 48


def test_tiny_siglip_from_config_scores_group_prompts():
    """transformers SiglipModel (image and text towers) behind the same handle; the tokenizer is
    any transformers-style callable (here CLIP's BPE read from open_clip's bundled vocabulary)."""
    from open_clip.tokenizer import SimpleTokenizer
    from transformers import SiglipConfig, SiglipModel

    from concept_grounding.evaluation import OpenVocabularyModel
    from concept_grounding.models.clip import ClipHandle, clip_group_scores

    bpe = SimpleTokenizer()

    def tokenizer(texts, padding=True, return_tensors="pt"):
        ids = [[bpe.encoder["<start_of_text>"], *bpe.encode(t)[:14], bpe.encoder["<end_of_text>"]] for t in texts]
        width = max(len(i) for i in ids)
        return {"input_ids": torch.tensor([i + [0] * (width - len(i)) for i in ids])}

    torch.manual_seed(0)
    config = SiglipConfig(
        text_config=dict(
            vocab_size=len(bpe.encoder),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            max_position_embeddings=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            image_size=16,
            patch_size=8,
        ),
    )
    model = SiglipModel(config).eval()
    handle = OpenVocabularyModel(
        ClipHandle(model, tokenizer, make_preprocess(size=16, mean=(0.5,) * 3, std=(0.5,) * 3), "transformers")
    )
    vocab = load_vocabulary()
    columns = handle.prepare(["crown_color", "bill_shape"], vocab)
    images = _images(4, 16)
    scores, none = handle.scores(images)
    pixels = make_preprocess(size=16, mean=(0.5,) * 3, std=(0.5,) * 3)(images)
    expected = torch.cat(
        [clip_group_scores(model, tokenizer, pixels, g, vocab) for g in ("crown_color", "bill_shape")], 1
    )
    assert none is None and scores.shape == (4, len(columns)) and torch.allclose(scores, expected, atol=1e-5)


def test_pytorch_concepts_labels_that_are_not_cub_names_ask_for_concept_names():
    """A PyC model's own labels name its columns where they are CUB names; else one clear line."""
    pytest.importorskip("torch_concepts")
    from torch_concepts import Annotations
    from torch_concepts.nn import ConceptBottleneckModel

    def pyc(labels, types=None):
        annotations = Annotations(
            labels=[*labels, "y"], cardinalities=[1] * (len(labels) + 1), types=types or ["binary"] * (len(labels) + 1)
        )
        return ConceptBottleneckModel(input_size=4, annotations=annotations, task_names=["y"]).eval()

    with pytest.raises(
        UsageError,
        match="ConceptBottleneckModel's concept labels are not all CUB attribute names: "
        "unknown attribute 'wings' .*; pass concept_names= with one CUB name",
    ):
        as_sub_model(pyc(["has_crown_color--black", "wings"]), normalize=False)
    named = as_sub_model(pyc(["c0", "c1"]), concept_names=["has_crown_color::black", 5], normalize=False)
    assert named.concept_names == ("has_crown_color::black", load_vocabulary().attributes[5])
    assert named.forward(torch.zeros(3, 4))[0].shape == (3, 2)
    with pytest.raises(UsageError, match=r"concepts \['c1 \(continuous\)'\] are not binary"):
        as_sub_model(pyc(["c0", "c1"], ["binary", "continuous", "binary"]), concept_names="sub", normalize=False)
