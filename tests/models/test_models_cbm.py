"""CBMs (independent / sequential / joint, hard / soft, per-concept) and CEMs."""

import pytest
import torch

from concept_grounding import load_vocabulary
from concept_grounding.models import (
    ConceptBottleneckModel,
    ConceptEmbeddingModel,
    predict_classes,
    predict_concepts,
    to_tensors,
    toy_concept_dataset,
    train_cbm,
    train_cem,
)

NAMES = ["has_primary_color::red", "has_primary_color::blue", "has_primary_color::yellow", "has_primary_color::green"]
FAST = dict(epochs=6, batch_size=16, progress=False)


@pytest.fixture(scope="module")
def toy(toy_concepts):
    """The session's toy concept tensors (conftest), whose concepts are :data:`NAMES`."""
    assert toy_concepts.concept_names == tuple(NAMES)
    return toy_concepts


@pytest.fixture(scope="module")
def independent(toy):
    return train_cbm(toy, "independent", seed=0, **FAST)


def _decreased(history) -> bool:
    return history.losses[-1] < 0.9 * history.losses[0]


def test_joint_cbm_loss_decreases_and_uses_lambda(toy):
    model = train_cbm(toy, "joint", concept_loss_weight=0.5, seed=0, **FAST)
    assert _decreased(model.history["joint"])
    assert model.training_mode == "joint" and model.concept_loss_weight == 0.5
    assert predict_concepts(model, toy.images).shape == (32, 4)
    assert predict_classes(model, toy.images).shape == (32, 4)


def test_independent_trains_concepts_then_labels_on_true_concepts(toy, independent):
    assert _decreased(independent.history["concepts"]) and _decreased(independent.history["labels"])
    # g was trained on the true one-hot concepts: fed them, it must classify perfectly
    logits = independent.label_predictor(toy.concepts)
    assert torch.equal(logits.argmax(1), toy.labels)


def test_sequential_reuses_the_concept_predictor(toy, independent):
    seq = train_cbm(toy, "sequential", concept_model=independent, seed=0, **FAST)
    assert seq.training_mode == "sequential"
    assert torch.equal(predict_concepts(seq, toy.images), predict_concepts(independent, toy.images))
    assert "concepts" in seq.history and _decreased(seq.history["labels"])
    # the original model is untouched
    assert independent.training_mode == "independent"
    with pytest.raises(ValueError, match="independent or sequential"):
        train_cbm(toy, "joint", concept_model=independent, **FAST)


def test_hard_bottleneck_feeds_zeros_and_ones(toy):
    model = train_cbm(toy, "joint", bottleneck="hard", seed=0, **FAST)
    out = model(toy.images[:8])
    assert set(out.concept_scores.unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(out.concept_scores, (out.concept_probs > 0.5).float())


def test_per_concept_cbm_shares_no_weights_between_concepts(toy):
    model = train_cbm(toy, "joint", per_concept=True, per_concept_channels=(4, 4, 8, 8), seed=0, **FAST)
    assert _decreased(model.history["joint"])
    assert model.backbone.groups == 4 and model.backbone.embed_dim == 32
    # concept 0's logit depends only on group 0's weights: every other group's gradient is zero
    model.zero_grad()
    model(toy.images[:4]).concept_logits[:, 0].sum().backward()
    first_conv = model.backbone.layers[0].weight.grad  # (4 groups * 4 channels, 3, 3, 3)
    assert first_conv[:4].abs().sum() > 0 and float(first_conv[4:].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="CNN backbone"):
        ConceptBottleneckModel(4, 4, backbone="vit", per_concept=True)


def test_intervention_replaces_concepts_before_the_label_predictor(independent, toy):
    mask = torch.ones(4, 4, dtype=torch.bool)
    out = independent(toy.images[:4], toy.concepts[:4], mask)
    assert torch.equal(out.concept_scores, toy.concepts[:4])
    assert torch.allclose(out.class_logits, independent.label_predictor(toy.concepts[:4]))


@pytest.mark.parametrize("kind", ["cnn", "vit"])
def test_cbm_save_load_round_trip_is_bit_exact(toy, tmp_path, kind):
    model = train_cbm(toy, "joint", backbone=kind, seed=0, epochs=1, batch_size=16, progress=False)
    model.save_pretrained(tmp_path)
    loaded = ConceptBottleneckModel.from_pretrained(tmp_path)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(predict_classes(model, toy.images), predict_classes(loaded, toy.images))
    assert loaded.concept_names == NAMES and loaded.backbone.get_config()["kind"] == kind


def test_concept_count_mismatch_is_a_clear_error(toy, independent):
    with pytest.raises(ValueError, match="concept_names has 3 names but num_concepts=4"):
        ConceptBottleneckModel(4, 2, concept_names=NAMES[:3])
    wrong = to_tensors(toy_concept_dataset(2, 32), "cbm_112", 32)
    with pytest.raises(ValueError, match="predicts 4 concepts but the dataset has 112"):
        independent.check_data(wrong)
    with pytest.raises(ValueError, match="predicts 4 concepts"):
        train_cbm(wrong, "sequential", concept_model=independent, **FAST)
    assert independent.check_vocabulary(load_vocabulary()) == tuple(load_vocabulary().attribute_indices(NAMES))
    bad = ConceptBottleneckModel(1, 2, concept_names=["has_wing_color::tartan"])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        bad.check_vocabulary(load_vocabulary())
    with pytest.raises(ValueError, match="mode must be"):
        train_cbm(toy, "parallel")


def test_training_is_seeded(toy):
    a = train_cbm(toy, "joint", seed=3, epochs=2, batch_size=16, progress=False)
    b = train_cbm(toy, "joint", seed=3, epochs=2, batch_size=16, progress=False)
    assert torch.equal(predict_classes(a, toy.images), predict_classes(b, toy.images))


# ----------------------------------------------------------------------- CEM
def test_cem_loss_decreases_and_round_trips(toy, tmp_path):
    model = train_cem(toy, seed=0, embedding_size=8, **FAST)
    assert _decreased(model.history["joint"])
    model.save_pretrained(tmp_path)
    loaded = ConceptEmbeddingModel.from_pretrained(tmp_path)
    assert torch.equal(predict_concepts(model, toy.images), predict_concepts(loaded, toy.images))
    assert torch.equal(predict_classes(model, toy.images), predict_classes(loaded, toy.images))


def test_cem_mixes_the_two_embeddings_by_probability(toy):
    torch.manual_seed(0)
    model = ConceptEmbeddingModel(4, 4, embedding_size=3).eval()
    x = toy.images[:2]
    out = model(x)
    c_plus, c_minus = model.concept_embeddings(model.backbone(x).pooled)
    p = torch.sigmoid(model.scoring(torch.cat([c_plus, c_minus], -1)).squeeze(-1))
    assert torch.allclose(out.concept_probs, p)
    mixed = p[..., None] * c_plus + (1 - p[..., None]) * c_minus
    assert torch.allclose(out.class_logits, model.label_predictor(mixed.flatten(1)))
    # intervening with concept = 1 everywhere selects c_plus exactly
    ones = torch.ones(2, 4)
    forced = model(x, ones, ones.bool())
    assert torch.allclose(forced.class_logits, model.label_predictor(c_plus.flatten(1)))
    with pytest.raises(ValueError, match="intervention_prob"):
        ConceptEmbeddingModel(4, 4, intervention_prob=1.5)


def test_tiny_world_cbm_and_cem_train():
    import concept_grounding.world as world_mod

    world = world_mod.BirdWorld(world_mod.WorldConfig(image_size=64, class_names=("017.Cardinal", "073.Blue_Jay")))
    train = to_tensors(world.to_dataset_dict(6, 1)["train"], load_vocabulary().sub_attribute_indices, 64)
    cbm = train_cbm(train, "joint", epochs=4, batch_size=4, progress=False)
    cem = train_cem(train, epochs=4, batch_size=4, progress=False)
    assert _decreased(cbm.history["joint"]) and _decreased(cem.history["joint"])
    assert predict_concepts(cbm, train.images).shape == (12, 32)


# ----------------------------------------------------------- training knobs
def test_backbone_norm_pool_and_downsample_round_trip(tmp_path):
    from concept_grounding.models.backbone import (
        SmallCNN,
        backbone_config,
        build_backbone,
    )

    assert backbone_config("cnn")["norm"] == "batch" and backbone_config("cnn")["pool"] == "max"
    net = SmallCNN(channels=(8, 8), strides=(2, 1), norm="group", pool="avg", downsample=2).eval()
    x = torch.rand(2, 3, 32, 32)
    out = net(x)
    assert tuple(out.features.shape) == (2, 8, 8, 8)  # 32 px / 2 (downsample) / 2 (stride)
    assert torch.allclose(out.pooled, out.features.mean(dim=(2, 3)))
    max_out = SmallCNN(channels=(8,), strides=(1,)).eval()(x)
    assert torch.allclose(max_out.pooled, max_out.features.amax(dim=(2, 3)))
    rebuilt = build_backbone(net.get_config())
    rebuilt.load_state_dict(net.state_dict())
    assert torch.equal(rebuilt.eval()(x).pooled, out.pooled)
    for bad, match in (
        (dict(norm="layer"), "norm must be"),
        (dict(pool="sum"), "pool must be"),
        (dict(downsample=0), "downsample must be"),
    ):
        with pytest.raises(ValueError, match=match):
            SmallCNN(**bad)


def test_random_hflip_and_schedules():
    from concept_grounding.models.training import fit, random_hflip

    x = torch.arange(6.0).view(2, 1, 1, 3)
    assert torch.equal(random_hflip(x, p=1.0), x.flip(-1)) and torch.equal(random_hflip(x, p=0.0), x)
    torch.manual_seed(0)
    flipped = random_hflip(torch.arange(3.0).view(1, 1, 1, 3).expand(400, 1, 1, 3))
    assert 150 < int((flipped[:, 0, 0, 0] == 2.0).sum()) < 250  # about half are mirrored
    for schedule in ("onecycle", "cosine"):
        w = torch.nn.Parameter(torch.zeros(1))
        hist = fit(
            lambda b, w=w: ((w - 3.0) ** 2).mean() + 0 * b[0].sum(),
            [w],
            (torch.zeros(8),),
            epochs=200,
            batch_size=8,
            lr=0.1,
            schedule=schedule,
            progress=False,
        )
        assert abs(float(w) - 3.0) < 0.05 and hist.losses[-1] < 1e-2, schedule
    with pytest.raises(ValueError, match="schedule must be"):
        fit(lambda b: w.sum(), [w], (torch.zeros(2),), schedule="step", progress=False)


def test_joint_concept_loss_sums_over_concepts():
    from concept_grounding.models.cbm import concept_bce

    logits, targets = torch.zeros(2, 5), torch.ones(2, 5)
    # each of the 5 concepts contributes log 2 per image (Koh et al.'s sum_j L_Cj, batch mean)
    assert torch.isclose(concept_bce(logits, targets), torch.tensor(5 * 0.6931472), atol=1e-5)


def test_cbm_learns_concepts_on_a_tiny_world():
    """Pins learning: a few seconds of training beat the majority baseline by a clear margin."""
    import numpy as np

    import concept_grounding.world as world_mod

    classes = ("017.Cardinal", "073.Blue_Jay", "047.American_Goldfinch", "029.American_Crow")
    world = world_mod.BirdWorld(world_mod.WorldConfig(image_size=64, class_names=classes))
    dd = world.to_dataset_dict(32, 8)
    attrs = np.asarray(dd["train"]["attributes"])
    columns = [i for i in load_vocabulary().cbm_112 if 0.1 < attrs[:, i].mean() < 0.9]  # concepts that vary
    train, test = to_tensors(dd["train"], columns, 64), to_tensors(dd["test"], columns, 64)
    model = train_cbm(train, "independent", epochs=10, seed=0, progress=False)
    accuracy = float(((predict_concepts(model, test.images) > 0.5).float() == test.concepts).float().mean())
    majority = float(((train.concepts.mean(0) > 0.5).float() == test.concepts).float().mean())
    assert majority < 0.8 and accuracy > majority + 0.1, (accuracy, majority)
    assert float((predict_classes(model, test.images).argmax(1) == test.labels).float().mean()) >= 0.75
