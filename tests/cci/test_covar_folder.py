"""``covar`` on an image folder with given masks: the world's export of
the ImageNet-style layout read back as COVAR objects is exactly the world's birds and masks, the
command runs on it, and a folder without masks or the attribute judge are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from concept_grounding.cli import main
from concept_grounding.testing.clip import save_clip_bpe_tokenizer

SIZE = 32
CLASSES = ("017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from concept_grounding.cci.layouts import export_world_image_folder

    return export_world_image_folder(
        tmp_path_factory.mktemp("covar") / "val", per_class=2, image_size=SIZE, class_names=CLASSES
    )


def test_folder_objects_are_the_world_birds_with_their_exact_masks(folder):
    from concept_grounding.cci.covar_folder import folder_objects
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=SIZE, class_names=CLASSES))
    objects, names, agreement = folder_objects(str(folder), str(folder / "class_names.txt"), 4, SIZE)
    assert agreement == {}  # no segmenter, nothing to compare
    assert names == ["cardinal", "yellow breasted chat", "blue jay"]
    assert [o.label for o in objects] == [0, 1, 2, 0]  # the classes take turns
    files = sorted(p for p in folder.rglob("*.png") if "masks" not in p.parts and p.parent != folder)
    by_class = {label: sorted(p for p in files if p.parent.name == sorted(CLASSES)[label]) for label in range(3)}
    picked = [by_class[0][0], by_class[1][0], by_class[2][0], by_class[0][1]]
    for obj, path in zip(objects, picked):
        sample = world.sample(int(path.stem))
        assert np.array_equal(obj.image, sample.image) and np.array_equal(obj.mask, sample.mask)
        assert sorted(CLASSES)[obj.label] == world.class_names[sample.label]


def test_covar_command_on_an_image_folder(folder, tmp_path):
    out = tmp_path / "out"
    assert (
        main(
            [
                "covar",
                "--images",
                str(folder),
                "--class-names",
                str(folder / "class_names.txt"),
                "--objects",
                "2",
                "--backgrounds",
                "1",
                "--size",
                str(SIZE),
                "--clusters",
                "3",
                "--steps",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "covar.json").read_text())
    assert summary["rows"] == 2 * 12
    assert "pointing_game" not in summary["truth"]["CCI"] and "foreground_share" in summary["truth"]["CCI"]
    assert "image folder" in (out / "report.md").read_text()


def test_covar_folder_errors_name_the_flag(folder, tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(folder, bare, ignore=shutil.ignore_patterns("masks"))
    for argv, named in (
        (["--images", str(bare)], "--images"),
        (["--images", str(folder), "--judge", "attributes"], "--judge"),
    ):
        out = tmp_path / "never"
        assert (
            main(["covar", *argv, "--objects", "1", "--backgrounds", "1", "--size", str(SIZE), "--out", str(out)]) == 2
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0], err


def _save_tiny_grounded_segmenter(folder):
    """Config-built OWL-ViT (with open_clip's BPE as its CLIP tokenizer) and SAM, random weights,
    saved like Hub checkpoints: ``folder/owlvit``, ``folder/sam``."""
    import torch
    from transformers import (
        OwlViTConfig,
        OwlViTForObjectDetection,
        OwlViTImageProcessor,
        OwlViTProcessor,
        SamConfig,
        SamImageProcessor,
        SamModel,
        SamProcessor,
    )

    owl, sam = folder / "owlvit", folder / "sam"
    tokenizer, vocab = save_clip_bpe_tokenizer(owl, model_max_length=16)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        detector = OwlViTForObjectDetection(
            OwlViTConfig(
                text_config=dict(
                    hidden_size=32,
                    intermediate_size=64,
                    num_hidden_layers=1,
                    num_attention_heads=4,
                    vocab_size=len(vocab),
                    max_position_embeddings=16,
                    eos_token_id=vocab["<|endoftext|>"],
                    bos_token_id=vocab["<|startoftext|>"],
                ),
                vision_config=dict(
                    hidden_size=32,
                    intermediate_size=64,
                    num_hidden_layers=1,
                    num_attention_heads=4,
                    image_size=64,
                    patch_size=16,
                ),
                projection_dim=32,
            )
        ).eval()
        segmenter = SamModel(
            SamConfig(
                vision_config=dict(
                    hidden_size=32,
                    output_channels=16,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    image_size=64,
                    patch_size=16,
                    global_attn_indexes=[0],
                    mlp_dim=64,
                    num_pos_feats=8,
                ),
                prompt_encoder_config=dict(hidden_size=16, image_size=64, patch_size=16),
                mask_decoder_config=dict(
                    hidden_size=16, mlp_dim=32, num_hidden_layers=1, num_attention_heads=2, iou_head_hidden_dim=16
                ),
            )
        ).eval()
    detector.save_pretrained(owl)
    OwlViTProcessor(
        OwlViTImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 64, "width": 64}), tokenizer
    ).save_pretrained(owl)
    segmenter.save_pretrained(sam)
    SamProcessor(SamImageProcessor(size={"longest_edge": 64}, pad_size={"height": 64, "width": 64})).save_pretrained(
        sam
    )
    return owl, sam


@pytest.fixture(scope="module")
def grounded(tmp_path_factory):
    return _save_tiny_grounded_segmenter(tmp_path_factory.mktemp("segmenter"))


def test_the_grounded_segmenter_masks_each_image_once(grounded, folder, tmp_path):
    from PIL import Image

    from concept_grounding.cci.segment import GroundedSegmenter
    from concept_grounding.errors import UsageError

    owl, sam = grounded
    seg = GroundedSegmenter.from_pretrained(str(owl), str(sam), threshold=0.0, cache_dir=tmp_path / "cache")
    image = Image.open(sorted(folder.glob("017.Cardinal/*.png"))[0])
    mask = seg(image, "a photo of a cardinal.")
    assert mask.shape == (SIZE, SIZE) and mask.dtype == bool
    assert len(list((tmp_path / "cache").iterdir())) == 1
    calls = []
    seg.box = lambda *a: calls.append(a)  # a cached image never reaches the detector again
    assert np.array_equal(seg(image, "a photo of a cardinal."), mask) and not calls
    strict = GroundedSegmenter.from_pretrained(str(owl), str(sam), threshold=1.0)
    with pytest.raises(UsageError, match="--detector.*finds no"):
        strict(image, "a photo of a cardinal.", source="bird.png")


def test_covar_on_a_folder_without_masks_computes_them_and_states_the_agreement(grounded, folder, tmp_path, capsys):
    import shutil

    owl, sam = grounded
    bare = tmp_path / "bare"
    shutil.copytree(folder, bare, ignore=shutil.ignore_patterns("masks"))
    common = [
        "--objects",
        "2",
        "--backgrounds",
        "1",
        "--size",
        str(SIZE),
        "--clusters",
        "3",
        "--steps",
        "2",
        "--detector",
        str(owl),
        "--segmenter",
        str(sam),
        "--detector-threshold",
        "0",
    ]
    out = tmp_path / "computed"
    assert main(["covar", "--images", str(bare), *common, "--out", str(out)]) == 0
    assert len(list((out / "mask_cache").iterdir())) == 2 and json.loads((out / "covar.json").read_text())["rows"] == 24
    out = tmp_path / "both"
    assert main(["covar", "--images", str(folder), *common, "--out", str(out)]) == 0
    agreement = json.loads((out / "covar.json").read_text())["mask_agreement"]
    assert agreement["images"] == 2 and 0.0 <= agreement["mask_iou"] <= 1.0
    assert "Computed masks against the folder's masks" in (out / "report.md").read_text()
    strict = list(common)
    strict[strict.index("--detector-threshold") + 1] = "1"
    capsys.readouterr()
    assert main(["covar", "--images", str(bare), *strict, "--out", str(tmp_path / "never")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]  # past the loading bars
    assert len(errors) == 1 and "--detector" in errors[0] and "finds no" in errors[0], errors
    assert not (tmp_path / "never").exists()
