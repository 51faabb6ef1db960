"""Bring your own model: SUB accuracy through ``evaluate_sub`` and ``concept-grounding sub``
equals predictions computed by hand and scored by the ``sub_accuracy`` evaluate module."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import evaluate
import numpy as np
import pytest
import torch

from concept_grounding.cli import main
from concept_grounding.errors import UsageError
from concept_grounding.evaluation import BinaryConceptModel, OpenVocabularyModel, evaluate_sub, load_sub_source
from concept_grounding.models.clip import ClipHandle
from concept_grounding.testing import save_tiny_transformers_clip
from concept_grounding.vocabulary import load_vocabulary

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ["017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat"]
SIZE = 32
WORLD_ARGS = ["--size", str(SIZE), "--classes", *CLASSES, "--no-progress"]

#: a user's model file: plain torch, no project classes; returns (concepts, classes).
USER_MODEL = """
import torch
from torch import nn
from torchvision import transforms


class TinyConceptNet(nn.Module):
    def __init__(self, num_concepts=112, num_classes=200):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.concepts = nn.Linear(16, num_concepts)
        self.classes = nn.Linear(num_concepts, num_classes)

    def forward(self, x):
        c = self.concepts(self.features(x)) * 20.0
        return c, self.classes(torch.sigmoid(c))


TRANSFORM = transforms.Compose([transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.25] * 3)])


def build():
    torch.manual_seed(0)
    return TinyConceptNet().eval(), TRANSFORM, "cbm_112"


def build_plain():  # no transform: the command line must state the normalisation
    torch.manual_seed(0)
    return TinyConceptNet().eval(), "cbm_112"


def build_bare():  # neither transform nor names
    torch.manual_seed(0)
    return TinyConceptNet().eval()
"""

#: a pytorch-concepts CBM as PyC users build it: CUB attributes as binary concepts and a categorical task.
PYC_MODEL = """
import torch
from torch_concepts import Annotations
from torch_concepts.nn import ConceptBottleneckModel

from concept_grounding.vocabulary import load_vocabulary

CONCEPTS = list(load_vocabulary().sub_substitutions.values())


def build():
    torch.manual_seed(0)
    annotations = Annotations(labels=CONCEPTS + ["species"], cardinalities=[1] * len(CONCEPTS) + [3],
                              types=["binary"] * len(CONCEPTS) + ["categorical"])
    backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten(), torch.nn.Linear(8, 8))
    return ConceptBottleneckModel(input_size=(3, 32, 32), annotations=annotations, task_names=["species"],
                                  backbone=backbone, latent_size=8).eval()
"""


@pytest.fixture(scope="module")
def sub():
    return load_sub_source(image_size=SIZE, classes=CLASSES)


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "my_model.py"
    path.write_text(textwrap.dedent(USER_MODEL))
    return path


def _user_module(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_model_by_hand", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _metric(config: str, predictions, sub, names, **extra):
    metric = evaluate.load(str(ROOT / "metrics" / "sub_accuracy"), config)
    return metric.compute(
        predictions=np.asarray(predictions).tolist(),
        target_attributes=list(sub["target_attribute"]),
        removed_attributes=[list(r) for r in sub["removed_attributes"]],
        reference_classes=list(sub["reference_class"]),
        concept_names=list(names),
        **extra,
    )


def _same(result, expected):
    for key in ("s_plus", "s_minus", "chance_s_plus", "chance_s_minus", "n_s_plus", "n_s_minus"):
        assert getattr(result, key) == pytest.approx(expected[key], nan_ok=True), key


def _by_hand_binary(user_file, sub):
    module = _user_module(user_file)
    model, transform, _ = module.build()
    images = torch.stack([transform(im.convert("RGB")) for im in sub["image"]])
    with torch.no_grad():
        probs = torch.sigmoid(model(images)[0]).numpy()
    names = [load_vocabulary().attributes[i] for i in load_vocabulary().cbm_112]
    return probs, names


def test_plain_module_via_evaluate_sub_equals_hand_and_metric_module(user_file, sub):
    probs, names = _by_hand_binary(user_file, sub)
    expected = _metric("binary", probs, sub, names)
    assert expected["n_s_plus"] > 0 and expected["n_s_minus"] > 0
    module = _user_module(user_file)
    model, transform, concept_names = module.build()
    result = evaluate_sub(
        model, sub, concept_names=concept_names, transform=transform, output=0, batch_size=7, progress=False
    )
    _same(result, expected)
    np.testing.assert_allclose(result.scores, probs, atol=1e-6)
    assert result.mode == "binary" and result.concept_names == tuple(names)
    for name, row in result.by_class.items():
        i = list(expected["breakdown"]["class"]["names"]).index(name)
        assert row["s_plus"] == pytest.approx(expected["breakdown"]["class"]["s_plus"][i], nan_ok=True)


def test_plain_module_via_the_cli_equals_hand_and_metric_module(user_file, sub, tmp_path, capsys):
    probs, names = _by_hand_binary(user_file, sub)
    expected = _metric("binary", probs, sub, names)
    out = tmp_path / "report"
    assert (
        main(
            [
                "sub",
                "--model",
                f"{user_file}:build",
                "--output",
                "0",
                "--out",
                str(out),
                "--batch-size",
                "16",
                *WORLD_ARGS,
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    for key in ("s_plus", "s_minus", "chance_s_plus", "n_s_plus", "n_s_minus"):
        assert saved[key] == pytest.approx(expected[key]), key
    assert saved["num_images"] == len(sub)
    assert {"sub_per_group.png", "sub_per_attribute.png", "sub_per_class.png", "report.md"} <= {
        p.name for p in out.iterdir()
    }
    assert set(saved["by_group"]) == set(expected["breakdown"]["group"]["names"])
    assert "s+" in capsys.readouterr().out
    (folder,) = (out / "eval_results").iterdir()  # the Hub's .eval_results format, one file per model
    from concept_grounding.eval_results import read_eval_results

    hub = read_eval_results(out)[folder.name]["sub"]
    assert {(e["dataset"]["id"], e["dataset"]["task_id"]): e["value"] for e in hub} == {
        ("bird-world-sub", "s_plus"): pytest.approx(expected["s_plus"]),
        ("bird-world-sub", "s_minus"): pytest.approx(expected["s_minus"]),
    }


def test_official_protocol_is_passed_through_and_differs_from_the_paper_rules(user_file, sub, tmp_path):
    probs, names = _by_hand_binary(user_file, sub)
    expected = _metric("binary", probs, sub, names, protocol="official")
    paper = _metric("binary", probs, sub, names)
    assert expected["n_s_minus"] != paper["n_s_minus"]  # one S- per image, not one per pair
    module = _user_module(user_file)
    model, transform, concept_names = module.build()
    result = evaluate_sub(
        model, sub, protocol="official", concept_names=concept_names, transform=transform, output=0, progress=False
    )
    _same(result, expected)
    assert result.protocol == "official"
    out = tmp_path / "report"
    assert (
        main(
            [
                "sub",
                "--model",
                f"{user_file}:build",
                "--output",
                "0",
                "--protocol",
                "official",
                "--out",
                str(out),
                *WORLD_ARGS,
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert saved["protocol"] == "official" and saved["n_s_minus"] == expected["n_s_minus"]


def test_tuple_output_without_a_declared_part_is_a_clear_error(user_file, sub):
    module = _user_module(user_file)
    model, transform, names = module.build()
    with pytest.raises(ValueError, match="output="):
        evaluate_sub(model, sub.select(range(4)), concept_names=names, transform=transform, progress=False)


def test_wrong_column_count_and_unknown_names_are_clear_errors(user_file, sub):
    module = _user_module(user_file)
    model, transform, _ = module.build()
    with pytest.raises(ValueError, match=r"expected \(B, 32\)"):
        evaluate_sub(model, sub.select(range(4)), concept_names="sub", transform=transform, output=0, progress=False)
    with pytest.raises(ValueError, match="concept_names\\[0\\]"):
        BinaryConceptModel(model, ["has_wings::purple"], transform=transform)
    with pytest.raises(ValueError, match="protocol"):
        evaluate_sub(model, sub, protocol="mine", concept_names="cbm_112", output=0)


def test_a_plain_module_without_a_normalisation_choice_is_refused(user_file, sub, tmp_path, capsys):
    """It used to be fed [0, 1] pixels without a word; a factory's (model, names)
    used to be read as (model, transform)."""
    module = _user_module(user_file)
    model, names = module.build_plain()
    with pytest.raises(UsageError, match="pass mean= and std= .*, or normalize=False"):
        evaluate_sub(model, sub, concept_names=names, output=0, progress=False)
    out = tmp_path / "report"
    assert main(["sub", "--model", f"{user_file}:build_plain", "--output", "0", "--out", str(out), *WORLD_ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (
        "pass --mean and --std (the normalisation it was trained with), a transform or a processor returned by "
        "the --model factory, or --no-normalize to feed it [0, 1] pixels"
    ) in err and "normalize=False" not in err
    assert not out.exists()
    assert (
        main(
            [
                "sub",
                "--model",
                f"{user_file}:build_plain",
                "--output",
                "0",
                "--no-normalize",
                "--out",
                str(out),
                *WORLD_ARGS,
            ]
        )
        == 0
    )
    unnormalised = evaluate_sub(model, sub, concept_names=names, output=0, normalize=False, progress=False)
    assert json.loads((out / "results.json").read_text())["s_plus"] == pytest.approx(unnormalised.s_plus)
    assert (
        main(
            [
                "sub",
                "--model",
                f"{user_file}:build_plain",
                "--output",
                "0",
                "--mean",
                "0.5,0.5,0.5",
                "--std",
                "0.25,0.25,0.25",
                "--out",
                str(out),
                *WORLD_ARGS,
            ]
        )
        == 0
    )
    model, transform, _ = module.build()  # TRANSFORM normalises with mean 0.5, std 0.25
    _same(
        evaluate_sub(model, sub, concept_names=names, transform=transform, output=0, progress=False),
        json.loads((out / "results.json").read_text()),
    )


def test_cli_errors_name_flags_and_the_python_api_names_keywords(user_file, sub, tmp_path, capsys):
    """`pass concept_names=` / `with output=` on the command line named Python keywords."""
    out = str(tmp_path / "report")
    assert main(["sub", "--model", f"{user_file}:build", "--out", out, *WORLD_ARGS]) == 2
    err = capsys.readouterr().err
    assert "declare which part holds the concepts with --output" in err and "output=" not in err
    assert main(["sub", "--model", f"{user_file}:build_bare", "--no-normalize", "--out", out, *WORLD_ARGS]) == 2
    err = capsys.readouterr().err
    assert "TinyConceptNet: pass --concept-names (a named set" in err and "concept_names=" not in err
    assert main(["sub", "--model", f"{user_file}:build", "--output", "classes", "--out", out, *WORLD_ARGS]) == 2
    assert "--output classes: the model's tuple output has no such part" in capsys.readouterr().err
    import datasets

    datasets.DatasetDict({"a": sub.select(range(2)), "b": sub.select(range(2))}).save_to_disk(str(tmp_path / "two"))
    assert (
        main(
            [
                "sub",
                "--model",
                f"{user_file}:build",
                "--output",
                "0",
                "--sub",
                str(tmp_path / "two"),
                "--out",
                out,
                "--no-progress",
            ]
        )
        == 2
    )
    assert "several splits ['a', 'b']; pass --split" in capsys.readouterr().err
    module = _user_module(user_file)
    with pytest.raises(UsageError, match="pass concept_names= "):
        evaluate_sub(module.build_bare(), sub, normalize=False, progress=False)
    model, transform, _ = module.build()
    with pytest.raises(UsageError, match="output='classes': the model's tuple output has no such part"):
        evaluate_sub(
            model, sub.select(range(2)), concept_names="cbm_112", transform=transform, output="classes", progress=False
        )


def test_integer_concept_names_are_0_based_and_cub_ids_an_explicit_choice(user_file, sub, tmp_path, capsys):
    """Integers index CUB's 312 from 0; CUB's 1-based attributes.txt ids need --index-base cub_id."""
    vocab = load_vocabulary()
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(str(i + 1) for i in vocab.cbm_112) + "\n")  # CUB's own ids of the 112
    zero_based = tmp_path / "indices.txt"
    zero_based.write_text("\n".join(str(i) for i in vocab.cbm_112) + "\n")
    args = ["sub", "--model", f"{user_file}:build", "--output", "0", *WORLD_ARGS]
    assert main([*args, "--concept-names", str(ids), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    line = [i + 1 for i in vocab.cbm_112].index(312) + 1
    assert (
        f"--concept-names: {ids}, line {line}: index 312 is outside cub_312 (0..311); CUB's own 1-based "
        "attribute ids (attributes.txt) need --index-base cub_id"
    ) in err
    reports = {}
    for name, extra in (
        ("named", ["--concept-names", "cbm_112"]),
        ("indices", ["--concept-names", str(zero_based)]),
        ("ids", ["--concept-names", str(ids), "--index-base", "cub_id"]),
    ):
        assert main([*args, *extra, "--out", str(tmp_path / name)]) == 0, name
        reports[name] = json.loads((tmp_path / name / "results.json").read_text())
    assert reports["named"]["concept_names"] == reports["indices"]["concept_names"] == reports["ids"]["concept_names"]
    assert reports["named"]["s_plus"] == reports["ids"]["s_plus"]
    assert main(["sub", "--help"]) == 0
    helptext = " ".join(capsys.readouterr().out.split())
    assert "integers are 0-based indices into CUB's 312 attributes" in helptext
    assert "cub_id, CUB's own 1-based attribute ids as written in attributes.txt" in helptext


def test_pytorch_concepts_model_as_it_comes(tmp_path, sub):
    """A PyC ConceptBottleneckModel (forward(query=..., input=...) -> AnnotatedTensor logits), names from
    its annotations, through evaluate_sub and the command line."""
    pytest.importorskip("torch_concepts")
    from concept_grounding.models.data import images_to_tensor

    path = tmp_path / "pyc_model.py"
    path.write_text(textwrap.dedent(PYC_MODEL))
    module = _user_module(path)
    model = module.build()
    with torch.no_grad():
        pixels = (images_to_tensor(sub["image"], SIZE) - 0.5) / 0.25
        probs = torch.sigmoid(model(query=module.CONCEPTS, input=pixels).logits.tensor).numpy()
    expected = _metric("binary", probs, sub, module.CONCEPTS)
    assert expected["n_s_plus"] > 0
    with pytest.raises(UsageError, match="ConceptBottleneckModel comes with no preprocessing"):
        evaluate_sub(model, sub, progress=False)
    result = evaluate_sub(model, sub, image_size=SIZE, mean=(0.5,) * 3, std=(0.25,) * 3, progress=False)
    _same(result, expected)
    np.testing.assert_allclose(result.scores, probs, atol=1e-6)
    assert result.concept_names == tuple(module.CONCEPTS)  # the task "species" is not a concept column
    # a callable returning PyC's InferenceOutput, its AnnotatedTensor picked with output="logits"
    by_hand = evaluate_sub(
        lambda x: model(query=module.CONCEPTS, input=x),
        sub,
        concept_names=module.CONCEPTS,
        output="logits",
        image_size=SIZE,
        mean=(0.5,) * 3,
        std=(0.25,) * 3,
        progress=False,
    )
    _same(by_hand, expected)
    out = tmp_path / "report"
    assert (
        main(
            [
                "sub",
                "--model",
                f"{path}:build",
                "--mean",
                "0.5,0.5,0.5",
                "--std",
                "0.25,0.25,0.25",
                "--out",
                str(out),
                *WORLD_ARGS,
            ]
        )
        == 0
    )
    _same(result, json.loads((out / "results.json").read_text()))


def test_project_saved_model_goes_through_the_same_path(tmp_path, sub):
    from concept_grounding.models import ConceptBottleneckModel, predict_concepts
    from concept_grounding.models.data import images_to_tensor

    names = [load_vocabulary().attributes[i] for i in load_vocabulary().cbm_112]
    torch.manual_seed(0)
    model = ConceptBottleneckModel(len(names), 3, concept_names=names).eval()
    model.save_pretrained(tmp_path / "cbm")
    probs = predict_concepts(model, images_to_tensor(sub["image"], SIZE)).numpy()
    expected = _metric("binary", probs, sub, names)
    out = tmp_path / "report"
    assert (
        main(["sub", "--model", str(tmp_path / "cbm"), "--image-size", str(SIZE), "--out", str(out), *WORLD_ARGS]) == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert saved["s_plus"] == pytest.approx(expected["s_plus"]) and saved["s_minus"] == pytest.approx(
        expected["s_minus"]
    )
    result = evaluate_sub(model, sub, image_size=SIZE, progress=False)
    _same(result, expected)


# ------------------------------------------------------------------ open vocabulary
def _group_by_hand(model, tokenizer, pixels, sub, include_none=False):
    from concept_grounding.models.clip import clip_group_scores

    vocab = load_vocabulary()
    groups = sorted({vocab.group_of(t) for t in sub["target_attribute"]})
    blocks = [clip_group_scores(model, tokenizer, pixels, g, vocab).numpy() for g in groups]
    names = [vocab.attributes[i] for g in groups for i in vocab.groups[g]]
    return np.concatenate(blocks, axis=1), names


OPEN_CLIP_MODEL = """
import open_clip
from concept_grounding.testing import tiny_open_clip
from concept_grounding.evaluation import make_preprocess


def build():
    model = tiny_open_clip(image_size=32)
    return {"model": model, "tokenizer": open_clip.get_tokenizer("ViT-B-16"),
            "preprocess": make_preprocess(size=32, mean=(0.48145466, 0.4578275, 0.40821073),
                                          std=(0.26862954, 0.26130258, 0.27577711))}
"""


def test_tiny_open_clip_in_group_mode(tmp_path, sub):
    import open_clip

    from concept_grounding.evaluation import make_preprocess
    from concept_grounding.testing import tiny_open_clip

    mean, std = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
    model, tokenizer = tiny_open_clip(image_size=SIZE), open_clip.get_tokenizer("ViT-B-16")
    preprocess = make_preprocess(size=SIZE, mean=mean, std=std)
    pixels = (
        torch.stack(
            [torch.from_numpy(np.asarray(im.convert("RGB"), np.float32) / 255).permute(2, 0, 1) for im in sub["image"]]
        )
        - torch.tensor(mean).view(1, 3, 1, 1)
    ) / torch.tensor(std).view(1, 3, 1, 1)
    scores, names = _group_by_hand(model, tokenizer, pixels, sub)
    expected = _metric("group", scores, sub, names)
    result = evaluate_sub(
        OpenVocabularyModel(ClipHandle(model, tokenizer, preprocess, "open_clip")), sub, batch_size=10, progress=False
    )
    _same(result, expected)
    np.testing.assert_allclose(result.scores, scores, atol=1e-5)
    assert result.mode == "group" and result.chance_s_plus < 0.5
    official = evaluate_sub(
        OpenVocabularyModel(ClipHandle(model, tokenizer, preprocess, "open_clip")),
        sub,
        protocol="official",
        progress=False,
    )
    _same(official, _metric("group", scores, sub, names, protocol="official"))

    path = tmp_path / "clip_factory.py"
    path.write_text(textwrap.dedent(OPEN_CLIP_MODEL))
    out = tmp_path / "report"
    assert main(["sub", "--model", f"{path}:build", "--out", str(out), *WORLD_ARGS]) == 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["mode"] == "group"
    assert saved["s_plus"] == pytest.approx(expected["s_plus"]) and saved["s_minus"] == pytest.approx(
        expected["s_minus"]
    )


def test_tiny_transformers_clip_in_group_mode(tmp_path, sub):
    from concept_grounding.models.clip import load_clip

    folder = tmp_path / "tiny-hf-clip"
    save_tiny_transformers_clip(folder)
    bundle = load_clip(str(folder), local_files_only=True)
    assert bundle.backend.name == "transformers"
    pixels = bundle.preprocess(list(sub["image"]))
    scores, names = _group_by_hand(bundle.model, bundle.tokenizer, pixels, sub)
    expected = _metric("group", scores, sub, names)
    result = evaluate_sub(bundle, sub, progress=False)
    _same(result, expected)
    out = tmp_path / "report"
    assert main(["sub", "--model", str(folder), "--out", str(out), *WORLD_ARGS]) == 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["s_plus"] == pytest.approx(expected["s_plus"]) and saved["s_minus"] == pytest.approx(
        expected["s_minus"]
    )


def test_none_option_adds_a_column_and_changes_chance(sub):
    import open_clip

    from concept_grounding.evaluation import make_preprocess
    from concept_grounding.testing import tiny_open_clip

    handle = OpenVocabularyModel(
        ClipHandle(
            tiny_open_clip(image_size=SIZE),
            open_clip.get_tokenizer("ViT-B-16"),
            make_preprocess(size=SIZE),
            "open_clip",
        )
    )
    without = evaluate_sub(handle, sub, progress=False)
    with_none = evaluate_sub(handle, sub, include_none=True, progress=False)
    assert with_none.none_scores.shape == (len(sub),)
    assert with_none.chance_s_plus < without.chance_s_plus
    with pytest.raises(ValueError, match="none"):
        evaluate_sub(handle, sub, include_none=True, protocol="official", progress=False)


def test_no_progress_silences_every_bar(user_file, sub, tmp_path, capfd):
    """``--no-progress`` / ``progress=False``: no bar at all, neither the world SUB render bar
    nor ``datasets``' bars while a local SUB folder loads."""
    from concept_grounding.loaders import write_sub

    folder = write_sub(sub, tmp_path / "SUB")
    capfd.readouterr()
    model = ["sub", "--model", f"{user_file}:build", "--output", "0"]
    assert main([*model, "--out", str(tmp_path / "a"), *WORLD_ARGS]) == 0
    assert main([*model, "--out", str(tmp_path / "b"), "--sub", str(folder), "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert "it/s" not in err and "%|" not in err and "examples/s" not in err, err


# ------------------------------------------------------------------ Hub-format SUB
def _hub_fixture(tmp_path, sub):
    """SUB's Hub layout: data/test-*.parquet with image, bird_label and attr_label (``has_x--y``)."""
    import datasets

    birds = [c.split(".", 1)[1] for c in CLASSES]
    attrs = sorted({t.replace("::", "--") for t in sub["target_attribute"]})
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "bird_label": datasets.ClassLabel(names=birds),
            "attr_label": datasets.ClassLabel(names=attrs),
        }
    )
    hub = datasets.Dataset.from_dict(
        {
            "image": list(sub["image"]),
            "bird_label": [CLASSES.index(c) for c in sub["reference_class"]],
            "attr_label": [attrs.index(t.replace("::", "--")) for t in sub["target_attribute"]],
        },
        features=features,
    )
    (tmp_path / "SUB" / "data").mkdir(parents=True)
    hub.to_parquet(str(tmp_path / "SUB" / "data" / "test-00000-of-00001.parquet"))
    return tmp_path / "SUB"


def test_hub_format_sub_with_cub_class_labels_via_the_cli(tmp_path, sub, user_file):
    from concept_grounding.loaders import write_cub
    from concept_grounding.world import BirdWorld, WorldConfig

    folder = _hub_fixture(tmp_path, sub)
    write_cub(
        BirdWorld(WorldConfig(image_size=SIZE, class_names=tuple(CLASSES))).to_dataset_dict(2, 1),
        tmp_path / "CUB_200_2011",
        progress=False,
    )
    out = tmp_path / "report"
    assert (
        main(
            [
                "sub",
                "--model",
                f"{user_file}:build",
                "--output",
                "0",
                "--sub",
                str(folder),
                "--cub-root",
                str(tmp_path / "CUB_200_2011"),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert saved["num_images"] == len(sub) and saved["n_s_minus"] > 0  # S- derived from the CUB class labels


def test_hub_format_sub_fixture_loads_through_datasets_and_evaluates(tmp_path, sub, user_file):
    import datasets

    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=SIZE, class_names=tuple(CLASSES)))
    _hub_fixture(tmp_path, sub)
    module = _user_module(user_file)
    model, transform, names = module.build()
    result = evaluate_sub(
        model,
        str(tmp_path / "SUB"),
        concept_names=names,
        transform=transform,
        output=0,
        source_options={"class_attributes": world.class_attributes, "class_names": CLASSES},
        progress=False,
    )
    loaded = datasets.load_dataset("parquet", data_dir=str(tmp_path / "SUB"))["test"]
    assert loaded.num_rows == result.num_images == len(sub)
    probs, hand_names = _by_hand_binary(user_file, sub)
    # S- derived from the class-level vectors: the class's positives in S+'s group, S+ excluded
    vocab = load_vocabulary()
    removed = [
        [
            vocab.attributes[j]
            for j in vocab.groups[vocab.group_of(t)]
            if world.class_attributes[CLASSES.index(c), j] and vocab.attributes[j] != t
        ]
        for c, t in zip(sub["reference_class"], sub["target_attribute"])
    ]
    metric = evaluate.load(str(ROOT / "metrics" / "sub_accuracy"))
    expected = metric.compute(
        predictions=probs.tolist(),
        target_attributes=list(sub["target_attribute"]),
        removed_attributes=removed,
        reference_classes=list(sub["reference_class"]),
        concept_names=hand_names,
    )
    _same(result, expected)


def test_device_and_dtype_options(user_file, sub):
    module = _user_module(user_file)
    model, transform, names = module.build()
    full = evaluate_sub(model, sub, concept_names=names, transform=transform, output=0, progress=False)
    half = evaluate_sub(
        model, sub, concept_names=names, transform=transform, output=0, device="cpu", dtype="bfloat16", progress=False
    )
    assert half.scores.dtype == np.float32 and next(model.parameters()).dtype == torch.bfloat16
    assert np.abs(half.scores - full.scores).max() < 0.1
    with pytest.raises(ValueError, match="dtype must be one of"):
        evaluate_sub(model, sub, concept_names=names, transform=transform, output=0, dtype="int8")


def test_several_models_in_one_run(tmp_path, capsys):
    """``--model`` repeats; each model gets its own report under ``--out`` and the
    summary has one row per model with the numbers of its own report."""
    from concept_grounding.testing import tiny_world_clip

    folders = []
    for seed in (0, 1):
        folder = tmp_path / f"clip{seed}"
        tiny_world_clip(seed=seed).save_pretrained(folder)
        folders.append(str(folder))
    out = tmp_path / "out"
    assert (
        main(["sub", "--model", folders[0], "--model", folders[1], "--out", str(out), "--no-progress", *WORLD_ARGS])
        == 0
    )
    rows = json.loads((out / "results.json").read_text())
    assert [r["name"] for r in rows] == folders
    for row in rows:
        own = json.loads((out / row["folder"] / "results.json").read_text())
        assert row["s_plus"] == pytest.approx(own["s_plus"]) and row["s_minus"] == pytest.approx(own["s_minus"])
    assert (out / "report.md").read_text().count("](clip") == 2


def test_the_sub_job_scores_each_model_once_and_saves_the_same_bytes_twice(tmp_path):
    """``sub`` runs as a job (``run_sub(config) -> SubResult``, ``save(out)``): the
    same model twice gets the same scores, and saving the result again writes the same files."""
    from concept_grounding.bench.sub_job import ScoredModel, SubConfig, run_sub
    from concept_grounding.testing import tiny_world_clip

    for name in ("clip", "copy"):
        tiny_world_clip(seed=0).save_pretrained(tmp_path / name)
    models = (ScoredModel(str(tmp_path / "clip")), ScoredModel(str(tmp_path / "copy")))
    config = SubConfig(models=models, world_size=SIZE, classes=tuple(CLASSES[:2]), progress=False, save_scores=True)
    result = run_sub(config)
    first, second = result.evaluations
    assert first.s_plus == second.s_plus and np.array_equal(first.scores, second.scores)
    assert result.save(tmp_path / "a") == tmp_path / "a" / "report.md"
    result.save(tmp_path / "b")
    for name in ("report.md", "results.json", "clip/scores.npz", "clip/sub_per_group.png", "copy/report.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    with pytest.raises(ValueError, match="models: give at least one model"):
        run_sub(SubConfig())
