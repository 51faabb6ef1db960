"""SUB candidate selection (Sec. 4.2): known answers on the bird world's exact truth."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from concept_grounding.cli import main
from concept_grounding.curation.candidates import candidate_world, world_attribute_data
from concept_grounding.tdg.candidates import (
    THRESHOLD_GRID,
    attribute_probabilities,
    candidate_pairings,
    select_attributes,
    select_classes,
    threshold_accuracy,
)
from concept_grounding.tdg.filter import group_options
from concept_grounding.tdg.filter_scorers import AttributeJudgeScorer
from concept_grounding.tdg.plan import read_pairings
from concept_grounding.vocabulary import load_vocabulary

VOCAB = load_vocabulary()


def _brute_force(p: np.ndarray, y: np.ndarray, thresholds, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Best threshold and accuracy per attribute by a plain loop (the paper's rule, written out)."""
    best_t, best_a = [], []
    for j in range(p.shape[1]):
        scores = []
        for t in thresholds:
            pred = p[:, j] >= t
            if metric == "accuracy":
                scores.append(np.mean(pred == y[:, j]))
            else:
                pos, neg = y[:, j], ~y[:, j]
                scores.append(0.5 * (pred[pos].mean() + (~pred[neg]).mean()))
        k = int(np.argmax(scores))  # first maximum: the lowest threshold among ties
        best_t.append(thresholds[k])
        best_a.append(scores[k])
    return np.array(best_t), np.array(best_a)


@pytest.mark.parametrize("metric", ["balanced", "accuracy"])
def test_best_threshold_is_the_grid_argmax(metric):
    rng = np.random.default_rng(0)
    y = rng.random((400, 12)) < 0.3
    edge = np.linspace(0.6, 0.95, 12)  # where each attribute's answers separate, noisily
    p = np.clip(np.where(y, edge + rng.normal(0.02, 0.04, y.shape), edge * rng.random(y.shape) ** 0.3), 0, 1)
    selection = select_attributes(p, y, VOCAB.attributes[:12], metric=metric)
    best_t, best_a = _brute_force(p, y, THRESHOLD_GRID, metric)
    assert np.array_equal(selection.best_threshold, best_t)
    assert np.allclose(selection.best_accuracy, best_a)
    assert selection.kept == tuple(a for a, b in zip(VOCAB.attributes[:12], best_a) if b >= 0.9)
    assert len(set(best_t)) > 1  # the grid matters: not every attribute picks the same threshold


def test_hand_computed_thresholds():
    """Positives at 0.8 / negatives at 0.72 separate first at 0.75; positives at 0.97 /
    negatives at 0.62 first at 0.65; an attribute nobody has cannot be assessed."""
    y = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=bool)
    p = np.array([[0.8, 0.97, 0.9], [0.8, 0.97, 0.9], [0.72, 0.62, 0.1], [0.72, 0.62, 0.1]])
    s = select_attributes(p, y, VOCAB.attributes[:3])
    assert s.best_threshold[:2].tolist() == [0.75, 0.65] and s.best_accuracy[:2].tolist() == [1.0, 1.0]
    assert np.isnan(s.best_accuracy[2]) and s.kept == tuple(VOCAB.attributes[:2])
    assert threshold_accuracy(p[:, :1], y[:, :1], (0.7,)).item() == 0.5  # everything predicted present


@pytest.fixture(scope="module")
def world_truth():
    images, labels = world_attribute_data(per_class=3)
    return images, labels.astype(bool)


def _index_scorer(table: np.ndarray) -> AttributeJudgeScorer:
    """A scorer whose "images" are row indices of ``table`` ((N, 312) probabilities)."""
    return AttributeJudgeScorer(lambda rows: table[np.asarray(rows)])


def _values_shown(labels: np.ndarray) -> np.ndarray:
    """``(N, 312)``: how many values of each attribute's group the bird shows."""
    shown = np.zeros(labels.shape, dtype=int)
    for columns in VOCAB.groups.values():
        shown[:, list(columns)] = labels[:, list(columns)].sum(axis=1, keepdims=True)
    return shown


def _truth_kept(labels: np.ndarray) -> tuple[str, ...]:
    """The attributes a truth-knowing multiple-choice scorer keeps (the next test's docstring)."""
    labels = labels.astype(bool)
    assessable = labels.any(axis=0) & ~labels.all(axis=0)
    alone = (labels & (_values_shown(labels) == 1)).sum(axis=0) / np.maximum(labels.sum(axis=0), 1)
    return tuple(np.asarray(VOCAB.attributes)[assessable & (0.5 * (1 + alone) >= 0.9)])


def test_a_scorer_that_knows_the_truth_keeps_every_assessable_attribute(world_truth):
    """The truth as a multiple-choice answer: a bird showing k values of a group gives each
    1/k, so only a value shown alone clears the 0.60 threshold. Balanced accuracy is then
    (1 + share of its birds showing it alone) / 2: kept iff that share is >= 0.8. On groups
    with one value per bird every assessable attribute is kept."""
    _, labels = world_truth
    n = len(labels)
    probs = attribute_probabilities(
        _index_scorer(labels.astype(float)), np.arange(n), VOCAB.attributes, VOCAB, batch_size=40
    )
    selection = select_attributes(probs, labels, VOCAB.attributes)
    assessable = labels.any(axis=0) & ~labels.all(axis=0)
    values_shown = _values_shown(labels)
    assert selection.kept == _truth_kept(labels)
    single_valued = [g for g, cols in VOCAB.groups.items() if (values_shown[:, list(cols)] <= 1).all()]
    for g in single_valued:
        cols = list(VOCAB.groups[g])
        assert set(np.asarray(VOCAB.attributes)[cols][assessable[cols]]) <= set(selection.kept)
    assert len(single_valued) >= 10 and 0 < len(selection.kept) < 312


def test_a_scorer_that_answers_at_random_keeps_no_attribute(world_truth):
    _, labels = world_truth
    rng = np.random.default_rng(1)
    probs = attribute_probabilities(
        _index_scorer(rng.random(labels.shape)), np.arange(len(labels)), VOCAB.attributes, VOCAB
    )
    assert select_attributes(probs, labels, VOCAB.attributes).kept == ()


def test_plain_accuracy_rewards_a_scorer_that_never_answers(world_truth):
    """Why ``balanced`` is the default: all-zero answers score 1 - prevalence in plain accuracy."""
    _, labels = world_truth
    silent = np.zeros(labels.shape)
    plain = select_attributes(silent, labels, VOCAB.attributes, metric="accuracy")
    assert len(plain.kept) > 100
    assert select_attributes(silent, labels, VOCAB.attributes).kept == ()


def test_class_selection_known_answers():
    names = ("017.Cardinal", "073.Blue_Jay", "047.American_Goldfinch")
    true = np.repeat(np.arange(3), 20)
    assert select_classes(true, true, names).kept == names  # reads the species perfectly: keeps every class
    constant = np.zeros_like(true)
    s = select_classes(true, constant, names)
    assert s.kept == ("017.Cardinal",) and s.accuracy.tolist() == [1.0, 0.0, 0.0]
    one_wrong = true.copy()
    one_wrong[25] = 2
    s = select_classes(true, one_wrong, names)
    assert s.accuracy[1] == 19 / 20 and s.kept == ("017.Cardinal", "047.American_Goldfinch")
    assert select_classes(true, one_wrong, names, min_accuracy=0.95).kept == names


def test_candidate_pairings_are_the_classes_without_s_plus():
    world = candidate_world()
    classes = world.class_names[:5]
    attributes = ["has_crown_color::yellow", "has_bill_shape::needle", "has_tail_pattern::striped"]
    pairings = candidate_pairings(classes, attributes, world.class_names, world.class_attributes, 7)
    expected = sum(not world.class_attributes[c, VOCAB.attribute_index(a)] for c in range(5) for a in attributes)
    assert len(pairings) == expected
    for p in pairings:
        row = world.class_attributes[world.class_names.index(p.reference_class)]
        assert not row[VOCAB.attribute_index(p.target_attribute)] and p.images == 7
        group = VOCAB.groups[VOCAB.group_of(p.target_attribute)]
        assert p.removed_attributes == tuple(VOCAB.attributes[i] for i in group if row[i])
        assert (p.guide_bird is None) == (p.target_attribute == "has_crown_color::yellow")  # colour: guide "bird"


LOOKUP = """
import numpy as np
from concept_grounding.curation.candidates import candidate_world

_WORLD = candidate_world()
_TRUTH = {}
for _c in range(_WORLD.num_classes):
    for _s in _WORLD.samples(_WORLD.class_indices(_c, 20)):
        _TRUTH[_s.image.tobytes()] = (_WORLD.class_names[_s.label], _s.attributes)
for _s in _WORLD.samples(range(2 * _WORLD.num_classes)):
    _TRUTH[_s.image.tobytes()] = (_WORLD.class_names[_s.label], _s.attributes)


def _key(image):
    return np.asarray(image.convert("RGB")).tobytes()


def species():
    return lambda images: [_TRUTH[_key(im)][0] for im in images]


def labels(images):
    return np.stack([_TRUTH[_key(im)][1] for im in images]).astype(float)
"""


@pytest.mark.slow  # candidates, then generate and filter on the tiny Flux
def test_candidates_run_end_to_end_into_generate_and_filter(tmp_path, monkeypatch, capsys):
    """classes (a classifier that reads the species perfectly keeps all 33), attributes (an
    oracle of the exact labels keeps every assessable one), plan -> generate -> filter."""
    (tmp_path / "world_truth.py").write_text(textwrap.dedent(LOOKUP))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "cand"
    assert (
        main(["candidates", "classes", "--classifier", "world_truth:species", "--out", str(out), "--no-progress"]) == 0
    )
    classes = json.loads((out / "classes.json").read_text())
    assert len(classes["kept"]) == 33 and all(c["accuracy"] == 1.0 for c in classes["classes"])
    assert (
        main(
            [
                "candidates",
                "attributes",
                "--scorer",
                "oracle",
                "--oracle",
                "world_truth:labels",
                "--per-class",
                "2",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    attributes = json.loads((out / "attributes.json").read_text())
    _, labels = world_attribute_data(per_class=2)
    assert tuple(attributes["kept"]) == _truth_kept(labels) and (out / "attributes.png").stat().st_size > 0
    assert (
        main(
            [
                "candidates",
                "plan",
                "--classes-file",
                str(out / "classes.json"),
                "--attributes-file",
                str(out / "attributes.json"),
                "--images-per-pairing",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    pairings = read_pairings(out / "pairings.jsonl")
    world = candidate_world()
    absent = sum(not world.class_attributes[c, VOCAB.attribute_index(a)] for c in range(33) for a in attributes["kept"])
    assert len(pairings) == absent
    assert f"{len(pairings)} pairings" in capsys.readouterr().out

    # one shape pairing with a guide bird of our choosing, generated by the tiny Flux, then filtered
    shape = next(p for p in pairings if VOCAB.group_of(p.target_attribute) == "bill_shape")
    row = {
        "reference_class": shape.reference_class,
        "target_attribute": shape.target_attribute,
        "guide_bird": "Rufous Hummingbird",
        "images": 2,
    }
    (tmp_path / "one.jsonl").write_text(json.dumps(row) + "\n")
    gen = tmp_path / "gen"
    assert (
        main(
            [
                "generate",
                "--out",
                str(gen),
                "--tiny",
                "--pairings",
                str(tmp_path / "one.jsonl"),
                "--steps",
                "2",
                "--size",
                "16",
                "--batch-size",
                "2",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (gen / "metadata.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {r["guide_bird"] for r in rows} == {"Rufous Hummingbird"}
    assert all("Rufous Hummingbird" in r["guide_prompt"] for r in rows)
    assert (
        main(
            [
                "filter",
                "--in",
                str(gen),
                "--out",
                str(tmp_path / "kept"),
                "--scorer",
                "tiny-clip",
                "--keep-fraction",
                "0.5",
            ]
        )
        == 0
    )
    evidence = [json.loads(line) for line in (tmp_path / "kept" / "filter_evidence.jsonl").read_text().splitlines()]
    kept = (tmp_path / "kept" / "metadata.jsonl").read_text().splitlines()
    assert len(evidence) == 2 and sum(e["kept"] for e in evidence) == len(kept)  # every image, kept or not
    assert all(
        e["reason"] in ("kept", "no_change", "s_plus_not_seen", "low_rank", "pairing_dropped")
        and len(e["probabilities"]) == len(group_options("bill_shape"))
        for e in evidence
    )
    assert (tmp_path / "kept" / "filter_sheet.png").stat().st_size > 0
    # the same filter asking two more groups: every image's answers there are kept as evidence
    assert (
        main(
            [
                "filter",
                "--in",
                str(gen),
                "--out",
                str(tmp_path / "checked"),
                "--scorer",
                "tiny-clip",
                "--keep-fraction",
                "0.5",
                "--check-groups",
                "bill_color",
                "wing_color",
            ]
        )
        == 0
    )
    checked = [json.loads(line) for line in (tmp_path / "checked" / "filter_evidence.jsonl").read_text().splitlines()]
    values = {
        VOCAB.group_of(a)
        for a in VOCAB.attributes
        if world.class_attributes[world.class_names.index(shape.reference_class), VOCAB.attribute_index(a)]
    }
    assert all(set(e["other_answers"]) == {"bill_color", "wing_color"} & values for e in checked)
    assert (
        main(
            [
                "filter",
                "--in",
                str(gen),
                "--out",
                str(tmp_path / "bad"),
                "--scorer",
                "tiny-clip",
                "--check-groups",
                "beak_colour",
            ]
        )
        == 2
    )


def test_classes_from_generated_images(tmp_path, monkeypatch):
    """``candidates classes --generate``: per-class images of a Flux prompted "A photo of a
    {class}" (the tiny random one here), named by a classifier; a classifier that names every
    image a Cardinal keeps exactly the Cardinal."""
    (tmp_path / "always.py").write_text("def cardinal():\n    return lambda images: ['017.Cardinal'] * len(images)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "cand"
    assert (
        main(
            [
                "candidates",
                "classes",
                "--generate",
                "tiny",
                "--classes",
                "017.Cardinal",
                "073.Blue_Jay",
                "--per-class",
                "2",
                "--steps",
                "2",
                "--classifier",
                "always:cardinal",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    report = json.loads((out / "classes.json").read_text())
    assert report["kept"] == ["017.Cardinal"]
    assert [(c["class"], c["images"], c["accuracy"]) for c in report["classes"]] == [
        ("017.Cardinal", 2, 1.0),
        ("073.Blue_Jay", 2, 0.0),
    ]


def test_a_transformers_image_classifier_whose_labels_name_cub_classes(tmp_path):
    """``--classifier <folder>``: a transformers image classifier (tiny ViT from a config) whose
    ``id2label`` names CUB classes in any spelling; its predictions map onto our classes and a
    label that is no candidate class counts as wrong."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    from concept_grounding.curation.candidates import load_classifier

    labels = {0: "073.Blue_Jay", 1: "Cardinal", 2: "999 Dodo"}
    config = ViTConfig(
        image_size=16,
        patch_size=8,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    torch.manual_seed(0)
    model = ViTForImageClassification(config).eval()
    model.save_pretrained(tmp_path / "vit")
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(tmp_path / "vit")
    names = ("017.Cardinal", "073.Blue_Jay")
    classify = load_classifier(str(tmp_path / "vit"), names)
    images, _ = world_attribute_data(per_class=2, class_names=names)
    predicted = classify(images)
    processor = ViTImageProcessor.from_pretrained(tmp_path / "vit")
    with torch.no_grad():
        raw = model(**processor(images=images, return_tensors="pt")).logits.argmax(-1).numpy()
    assert predicted.tolist() == [{0: 1, 1: 0, 2: -1}[int(r)] for r in raw]


def test_candidate_attributes_on_a_cub_tree(tmp_path, monkeypatch):
    """``candidates attributes --cub-root``: the world's CUB_200_2011 export (both splits, its
    per-image labels) gives the same selection as the world's renders in memory."""
    from concept_grounding.loaders.cub_write import write_cub
    from concept_grounding.world.dataset import world_dataset_dict

    (tmp_path / "world_truth.py").write_text(textwrap.dedent(LOOKUP))
    monkeypatch.syspath_prepend(str(tmp_path))
    world = candidate_world()
    root = write_cub(world_dataset_dict(world, 1, 1, progress=False), tmp_path / "CUB_200_2011", progress=False)
    out = tmp_path / "cand"
    assert (
        main(
            [
                "candidates",
                "attributes",
                "--cub-root",
                str(root),
                "--scorer",
                "oracle",
                "--oracle",
                "world_truth:labels",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    report = json.loads((out / "attributes.json").read_text())
    _, labels = world_attribute_data(per_class=2)
    assert report["images"] == 2 * world.num_classes and tuple(report["kept"]) == _truth_kept(labels)
