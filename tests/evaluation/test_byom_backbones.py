"""Standard CUB backbones (torchvision ResNet-18 / 50, Inception-v3, timm) for the concept
models: shapes, initial weights from a file, the CUB augmentation, training on the tiny CUB
fixture with random init, and a save / load round trip that does not need the weights file."""

from __future__ import annotations

import pytest
import torch

from concept_grounding.models.backbone import (
    StandardBackbone,
    backbone_config,
    build_backbone,
    drop_init_weights,
)
from concept_grounding.models.backbone_standard import CUBAugment, load_backbone_weights


@pytest.mark.parametrize(
    ("arch", "crop", "dim"), [("resnet18", 64, 512), ("resnet50", 64, 2048), ("inception_v3", 80, 2048)]
)
def test_standard_backbones_expose_a_feature_map(arch, crop, dim):
    torch.manual_seed(0)
    net = build_backbone({"kind": arch, "crop_size": crop}).eval()
    out = net(torch.rand(2, 3, crop + 8, crop + 8))
    assert out.pooled.shape == (2, dim) and out.features.shape[:2] == (2, dim)
    assert torch.allclose(out.pooled, out.features.mean(dim=(2, 3)))
    assert net.get_config() == {"kind": arch, "crop_size": crop, "augment": True}


def test_default_crops_follow_koh_et_al():
    assert backbone_config("resnet18")["crop_size"] == 224
    assert backbone_config("inception_v3")["crop_size"] == 299
    with pytest.raises(ValueError, match="unknown option"):
        backbone_config({"kind": "resnet18", "channels": [3]})
    with pytest.raises(ValueError, match="arch must be"):
        StandardBackbone("resnet7")


def test_timm_models_are_backbones_too():
    net = build_backbone({"kind": "timm:resnet10t", "crop_size": 32}).eval()
    out = net(torch.rand(1, 3, 32, 32))
    assert out.features.ndim == 4 and out.pooled.shape == (1, net.embed_dim)


def test_initial_weights_from_a_file_with_head_and_prefix(tmp_path):
    import torchvision
    from safetensors.torch import save_file

    torch.manual_seed(3)
    reference = torchvision.models.resnet18(weights=None, num_classes=10)
    save_file({k: v.contiguous() for k, v in reference.state_dict().items()}, str(tmp_path / "r18.safetensors"))
    torch.save({"state_dict": {f"module.{k}": v for k, v in reference.state_dict().items()}}, tmp_path / "r18.pth")
    for file in ("r18.safetensors", "r18.pth"):
        net = StandardBackbone("resnet18", crop_size=32, weights=str(tmp_path / file))
        assert torch.equal(net.net.conv1.weight, reference.conv1.weight)
        assert torch.equal(net.net.layer4[1].bn2.running_var, reference.layer4[1].bn2.running_var)
        assert net.missing_weights == []
    torch.save({"x": torch.zeros(3)}, tmp_path / "other.pth")
    with pytest.raises(ValueError, match="none of its 1 tensors"):
        StandardBackbone("resnet18", weights=str(tmp_path / "other.pth"))
    with pytest.raises(ValueError, match="needs"):
        load_backbone_weights(torchvision.models.resnet50(weights=None), str(tmp_path / "r18.safetensors"))
    with pytest.raises(ValueError, match="not a file and not a Hub id"):
        StandardBackbone("resnet18", weights=str(tmp_path / "missing" / "w.pt" / "x"))


def test_cub_augmentation_is_random_in_training_and_a_centre_crop_in_eval():
    images = torch.rand(4, 3, 40, 40)
    aug = CUBAugment(32)
    torch.manual_seed(0)
    a = aug(images)
    torch.manual_seed(1)
    b = aug(images)
    assert a.shape == (4, 3, 32, 32) and not torch.equal(a, b) and a.min() >= 0 and a.max() <= 1
    assert torch.equal(aug.eval()(images), images[..., 4:36, 4:36])


@pytest.mark.slow
def test_cbm_trains_on_the_tiny_cub_fixture_with_a_resnet_and_round_trips(tmp_path):
    from safetensors.torch import save_file

    from concept_grounding.loaders import load_cub, write_cub
    from concept_grounding.models import ConceptBottleneckModel, predict_concepts, to_tensors, train_cbm
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=40, class_names=("017.Cardinal", "073.Blue_Jay")))
    write_cub(world.to_dataset_dict(4, 2), tmp_path / "CUB_200_2011", progress=False)
    cub = load_cub(tmp_path / "CUB_200_2011", min_class_count=None, progress=False)
    train = to_tensors(cub["train"], "cbm_112", image_size=36, label_source="class")
    init = StandardBackbone("resnet18", crop_size=32)
    save_file({k: v.contiguous() for k, v in init.net.state_dict().items()}, str(tmp_path / "init.safetensors"))
    model = train_cbm(
        train,
        mode="joint",
        epochs=1,
        batch_size=4,
        progress=False,
        backbone={"kind": "resnet18", "crop_size": 32, "weights": str(tmp_path / "init.safetensors")},
    )
    assert model.backbone.arch == "resnet18" and model.history["joint"].losses
    drop_init_weights(model).save_pretrained(tmp_path / "cbm")
    (tmp_path / "init.safetensors").unlink()  # the saved model must not need the initial weights
    loaded = ConceptBottleneckModel.from_pretrained(str(tmp_path / "cbm")).eval()
    assert torch.allclose(predict_concepts(model, train.images), predict_concepts(loaded, train.images), atol=1e-6)


@pytest.mark.slow
def test_bench_trains_table1_models_on_cub_with_a_resnet_and_sub_evaluates_them(tmp_path):
    """bench --backbone resnet18 on the tiny CUB + SUB fixture (random init, then from a weights
    file); the saved CBM goes through `concept-grounding sub` like any other saved model."""
    import json

    from safetensors.torch import save_file

    from concept_grounding.cli import main
    from concept_grounding.loaders import write_cub, write_sub
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal", "073.Blue_Jay")))
    write_cub(world.to_dataset_dict(3, 1), tmp_path / "CUB_200_2011", progress=False)
    write_sub(world.sub_dataset(per_pairing=1), tmp_path / "SUB")
    init = StandardBackbone("resnet18", crop_size=32)
    save_file({k: v.contiguous() for k, v in init.net.state_dict().items()}, str(tmp_path / "init.safetensors"))
    common = [
        "bench",
        "--cub-root",
        str(tmp_path / "CUB_200_2011"),
        "--sub",
        str(tmp_path / "SUB"),
        "--min-class-count",
        "0",
        "--concepts",
        "all",
        "--backbone",
        "resnet18",
        "--crop-size",
        "32",
        "--size",
        "36",
        "--epochs",
        "1",
        "--models",
        "CBM (joint)",
        "--no-clip",
        "--train-per-class",
        "3",
    ]
    assert main([*common, "--no-posthoc", "--out", str(tmp_path / "random")]) == 0
    assert (
        main([*common, "--backbone-weights", str(tmp_path / "init.safetensors"), "--out", str(tmp_path / "init")]) == 0
    )
    for run in ("random", "init"):
        results = json.loads((tmp_path / run / "results.json").read_text())
        assert next(r["name"] for r in results["table1"] if not r.get("reference")) == "CBM (joint)"
        saved = json.loads((tmp_path / run / "models" / "cbm-joint" / "config.json").read_text())
        assert saved["backbone"]["kind"] == "resnet18" and "weights" not in saved["backbone"]
    assert (tmp_path / "init" / "models" / "posthoc-cbm" / "config.json").is_file()
    (tmp_path / "init.safetensors").unlink()
    assert (
        main(
            [
                "sub",
                "--model",
                str(tmp_path / "init" / "models" / "cbm-joint"),
                "--sub",
                str(tmp_path / "SUB"),
                "--out",
                str(tmp_path / "sub"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "sub" / "results.json").read_text())["n_s_plus"] > 0


def test_bench_config_rejects_a_per_concept_cbm_on_a_standard_backbone():
    from concept_grounding.bench import BenchConfig

    with pytest.raises(ValueError, match="per-concept CBM needs the small CNN"):
        BenchConfig(backbone="resnet50")
    with pytest.raises(ValueError, match="resnet18"):
        BenchConfig(backbone="resnet7", models=("CBM (joint)",))
    assert (
        BenchConfig(backbone={"kind": "inception_v3", "crop_size": 96}, models=("CEM",)).backbone["kind"]
        == "inception_v3"
    )
