"""CCI core: exactness on both backends, known-answer maps, hook hygiene, bad input."""

from __future__ import annotations

import gc
import math
import tracemalloc

import pytest
import torch

from concept_grounding.cci import (
    ClusterMask,
    ConceptClusterImportance,
    get_backend,
    kmeans,
)
from concept_grounding.cci.attention import CLUSTER_MASK_ATTENTION
from concept_grounding.cci.fast import masked_embeddings_fast, unmasked_trace
from concept_grounding.cci.masking import cluster_key_mask, masked_embeddings_reference
from concept_grounding.testing import (
    known_answer_open_clip,
    tiny_open_clip,
    tiny_transformers_clip,
)


def _random_biases(model):
    """Config-built models start with zero attention biases; the fast path folds the key
    bias away and moves the value bias, so the tests need them non-zero."""
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return model


@pytest.fixture(scope="module")
def models():
    return {
        "open_clip": _random_biases(tiny_open_clip(layers=3)),
        "transformers": _random_biases(tiny_transformers_clip(layers=3)),
        "transformers_vision": _random_biases(tiny_transformers_clip(layers=2, vision_only=True)),
    }


def _deleted_reference(backend, px, labels, k):
    """The model's own encoder run on sequences with cluster k's tokens deleted."""
    x0 = backend.embed(px)
    rows = []
    for i in range(px.shape[0]):
        for c in range(k):
            keep = torch.cat([torch.tensor([True]), labels[i] != c])
            rows.append(backend.pool(backend.run_encoder(x0[i : i + 1, keep])))
    return torch.cat(rows).view(px.shape[0], k, -1)


@pytest.mark.parametrize(
    ("padded", "group_tokens"),
    [(False, None), (True, None), (False, 1), (True, 12)],
    ids=["per-variant", "padded", "one-variant-groups", "padded-groups"],
)
@pytest.mark.parametrize("name", ["open_clip", "transformers", "transformers_vision"])
def test_masked_equals_deleted_on_both_backends(models, name, padded, group_tokens):
    backend = get_backend(models[name])
    gen = torch.Generator().manual_seed(1)
    px = torch.randn(2, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 3, (2, backend.num_patches), generator=gen)
    with torch.no_grad():
        hooked = masked_embeddings_reference(backend, px, labels, 3)
        deleted = _deleted_reference(backend, px, labels, 3)
        fast = masked_embeddings_fast(backend, unmasked_trace(backend, px), labels, 3, padded, group_tokens)
        unmasked = backend.encode_image(px)
    assert torch.allclose(hooked, deleted, atol=1e-5, rtol=0)
    assert torch.allclose(fast, deleted, atol=1e-5, rtol=0)
    # the mask really acts: every variant differs from the unmasked embedding
    assert (hooked - unmasked[:, None]).abs().amax(-1).min() > 1e-4


@pytest.mark.parametrize("name", ["open_clip", "transformers"])
def test_unmasked_trace_matches_model_forward(models, name):
    backend = get_backend(models[name])
    px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.allclose(unmasked_trace(backend, px).image_embeds, backend.encode_image(px), atol=1e-5)


def test_fast_and_hook_methods_agree(models):
    px = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    text = torch.randn(3, 16, generator=torch.Generator().manual_seed(4))
    fast = ConceptClusterImportance(models["open_clip"], num_clusters=4, batch_size=2)(px, text)
    hook = ConceptClusterImportance(models["open_clip"], num_clusters=4, method="hook")(px, text)
    assert torch.equal(fast.labels, hook.labels)
    assert torch.allclose(fast.drops, hook.drops, atol=1e-5)
    assert fast.maps.shape == (3, 32, 32) and fast.patch_maps.shape == (3, 4, 4)


def _red_blue(red_patches, grid=4, patch=4):
    img = torch.zeros(1, 3, grid * patch, grid * patch)
    img[:, 2] = 1.0
    for r, c in red_patches:
        img[:, :, r * patch : (r + 1) * patch, c * patch : (c + 1) * patch] = torch.tensor([1.0, 0.0, 0.0])[
            :, None, None
        ]
    return img


@pytest.mark.parametrize("method", ["fast", "hook"])
def test_known_answer_map_is_the_red_cluster(method):
    model = known_answer_open_clip()
    red = [(0, 0), (0, 1), (1, 0), (2, 3), (3, 3)]
    img = _red_blue(red)
    cci = ConceptClusterImportance(model, num_clusters=2, method=method, upsample="nearest")
    emb = cci.embed(img)
    out = cci.explain_embeddings(emb, emb.image_embeds)  # text = the unmasked embedding
    expected = torch.zeros(4, 4)
    for r, c in red:
        expected[r, c] = 1.0
    assert torch.allclose(out.patch_maps[0], expected, atol=1e-6)
    red_k = int(out.labels[0, 0])
    # drop of the red cluster: 1 - cos(c, c + b) = 1 - 1/sqrt(2)
    assert out.drops[0, red_k].item() == pytest.approx(1 - 1 / math.sqrt(2), abs=1e-4)
    assert abs(out.drops[0, 1 - red_k].item()) < 1e-6
    assert out.similarity[0].item() == pytest.approx(1.0, abs=1e-6)
    assert out.normalizer.tolist() == [1]
    # upsampled map: each 4x4 pixel block carries its patch's value
    assert torch.allclose(out.maps[0, ::4, ::4], expected)


def test_open_clip_string_texts(models):
    cci = ConceptClusterImportance(models["open_clip"], num_clusters=3)
    px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    out = cci(px, ["a photo of a bird", "a photo of a dog"])
    assert out.weights.shape == (2, 3)
    with pytest.raises(ValueError, match="texts"):
        cci(px, ["a", "b", "c"])


def test_hooks_removed_after_exception(models):
    backend = get_backend(models["open_clip"])
    mask = torch.zeros(1, backend.num_tokens, dtype=torch.bool)
    mask[0, 1:4] = True
    # the error is raised inside the mask's block: the block is the test
    with pytest.raises(RuntimeError, match="boom"), ClusterMask(backend, mask) as ctx:  # noqa: PT012
        assert len(backend.encoder._forward_pre_hooks) == 1 and ctx.active
        raise RuntimeError("boom")
    assert len(backend.encoder._forward_pre_hooks) == 0 and not ctx.active
    # a batch that does not match the mask fails inside the forward; the hook still goes
    with pytest.raises(ValueError, match="key_mask"), ClusterMask(backend, mask):
        backend.encode_image(torch.zeros(2, 3, 32, 32))
    assert len(backend.encoder._forward_pre_hooks) == 0
    # after the context the model is unmasked again
    px = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        before = backend.encode_image(px)
        with ClusterMask(backend, mask):
            masked = backend.encode_image(px)
        after = backend.encode_image(px)
    assert torch.equal(before, after) and not torch.allclose(before, masked)


@pytest.mark.parametrize("name", ["transformers", "transformers_vision"])
def test_transformers_mask_goes_through_the_attention_interface(models, name):
    """The vision tower dispatches to "cci_cluster_mask" inside the block only, the text
    tower never, and the previous implementation comes back, also after an exception."""
    model = models[name]
    backend = get_backend(model)
    config = backend.attention_config
    text_config = getattr(model.config, "text_config", None)
    mask = torch.zeros(1, backend.num_tokens, dtype=torch.bool)
    mask[0, 2:5] = True
    before = config._attn_implementation
    assert before == "sdpa"
    px = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        plain = backend.encode_image(px)
        with ClusterMask(model, mask) as ctx:
            assert ctx.active and config._attn_implementation == CLUSTER_MASK_ATTENTION
            if text_config is not None:
                assert text_config._attn_implementation == "sdpa"
            masked = backend.encode_image(px)
        assert config._attn_implementation == before and not ctx.active
        with pytest.raises(KeyError), ClusterMask(model, mask):
            raise KeyError("x")
        assert config._attn_implementation == before
        # a batch that does not match the mask fails inside the forward; the switch still goes back
        with pytest.raises(ValueError, match="key_mask"), ClusterMask(model, mask):
            backend.encode_image(torch.zeros(2, 3, 32, 32))
        assert config._attn_implementation == before
        assert torch.equal(backend.encode_image(px), plain) and not torch.allclose(plain, masked, atol=1e-4)
    assert all(len(m._forward_pre_hooks) == 0 for m in model.modules())


def test_transformers_mask_is_exact_with_eager_attention():
    """Delegating to the eager implementation gives the same masked embedding as sdpa, and
    both equal the deleted-token forward."""
    model = _random_biases(tiny_transformers_clip(layers=2, vision_only=True))
    backend = get_backend(model)
    gen = torch.Generator().manual_seed(9)
    px = torch.randn(2, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 2, (2, backend.num_patches), generator=gen)
    with torch.no_grad():
        sdpa = masked_embeddings_reference(backend, px, labels, 2)
        model.set_attn_implementation("eager")
        try:
            eager = masked_embeddings_reference(backend, px, labels, 2)
            fast_eager = masked_embeddings_fast(backend, unmasked_trace(backend, px), labels, 2, True)
            assert backend.attention_config._attn_implementation == "eager"
        finally:
            model.set_attn_implementation("sdpa")
        deleted = _deleted_reference(backend, px, labels, 2)
    assert torch.allclose(sdpa, deleted, atol=1e-5, rtol=0)
    assert torch.allclose(eager, deleted, atol=1e-5, rtol=0)
    assert torch.allclose(fast_eager, deleted, atol=1e-5, rtol=0)


def test_transformers_mask_is_per_context(models):
    """A thread that runs the same model while another thread holds the mask is not masked."""
    import threading

    model = models["transformers"]
    backend = get_backend(model)
    mask = torch.zeros(1, backend.num_tokens, dtype=torch.bool)
    mask[0, 1:9] = True
    px = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(10))
    results = {}
    with torch.no_grad():
        plain = backend.encode_image(px)
        with ClusterMask(model, mask):
            worker = threading.Thread(target=lambda: results.update(other=backend.encode_image(px)))
            worker.start()
            worker.join()
            masked = backend.encode_image(px)
    assert torch.allclose(results["other"], plain, atol=1e-6)
    assert not torch.allclose(masked, plain, atol=1e-4)


def test_transformers_mask_refuses_flash_and_nesting(models):
    model = models["transformers_vision"]
    backend = get_backend(model)
    mask = torch.zeros(1, backend.num_tokens, dtype=torch.bool)
    with ClusterMask(model, mask), pytest.raises(RuntimeError, match="re-entrant"), ClusterMask(model, mask):
        pass
    assert backend.attention_config._attn_implementation == "sdpa"
    backend.attention_config._attn_implementation = "flash_attention_2"  # as if loaded that way
    try:
        with pytest.raises(ValueError, match="sdpa"), ClusterMask(model, mask):
            pass
    finally:
        backend.attention_config._attn_implementation = "sdpa"


def test_cls_key_cannot_be_masked(models):
    mask = torch.zeros(1, 17, dtype=torch.bool)
    mask[0, 0] = True
    with pytest.raises(ValueError, match="CLS"):
        ClusterMask(models["open_clip"], mask)
    with pytest.raises(ValueError, match="key_mask"):
        ClusterMask(models["open_clip"], torch.zeros(1, 5, dtype=torch.bool))


def test_bad_inputs(models):
    with pytest.raises(ValueError, match="num_clusters"):
        ConceptClusterImportance(models["open_clip"], num_clusters=17)  # 16 patches
    with pytest.raises(ValueError, match="num_clusters"):
        kmeans(torch.randn(1, 4, 2), 5)
    cci = ConceptClusterImportance(models["open_clip"], num_clusters=3)
    px = torch.randn(2, 3, 32, 32)
    with pytest.raises(ValueError, match="texts"):
        cci(px, torch.randn(3, 16))
    with pytest.raises(ValueError, match="pixel_values"):
        cci(torch.randn(2, 3, 16, 16), torch.randn(2, 16))
    with pytest.raises(ValueError, match="not a supported CLIP ViT"):
        ConceptClusterImportance(torch.nn.Linear(3, 3))
    from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg

    resnet = CLIP(
        16, CLIPVisionCfg(layers=(1, 1, 1, 1), width=8, image_size=32), CLIPTextCfg(layers=1, width=16, heads=2)
    )
    with pytest.raises(ValueError, match="not a VisionTransformer"):
        ConceptClusterImportance(resnet)
    from transformers import BertConfig, BertModel

    with pytest.raises(ValueError, match="not a transformers CLIP"):
        ConceptClusterImportance(
            BertModel(
                BertConfig(
                    hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=10
                )
            )
        )


def test_train_mode_is_refused():
    model = tiny_open_clip(with_text=False).train()
    cci = ConceptClusterImportance(model, num_clusters=2)
    with pytest.raises(ValueError, match="eval"):
        cci.embed(torch.randn(1, 3, 32, 32))


def test_kmeans_deterministic_and_batch_invariant():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, 5, generator=gen)
    a, _ = kmeans(x, 4, seed=7)
    b, _ = kmeans(x, 4, seed=7)
    single, _ = kmeans(x[1:2], 4, seed=7)
    assert torch.equal(a, b) and torch.equal(a[1], single[0])
    # K = N puts every point in its own cluster
    lab, _ = kmeans(x[:, :6], 6, seed=0)
    assert all(len(set(row.tolist())) == 6 for row in lab)
    # well-separated blobs are recovered exactly
    blobs = torch.cat([torch.randn(10, 2, generator=gen) * 0.01 + off for off in (0.0, 5.0, 10.0)])[None]
    lab, _ = kmeans(blobs, 3, seed=1)
    assert all(len(set(lab[0, i * 10 : (i + 1) * 10].tolist())) == 1 for i in range(3))
    assert len(set(lab[0].tolist())) == 3


def test_negative_and_zero_drops_normalisation():
    from concept_grounding.cci import cluster_weights

    w, rule = cluster_weights(torch.tensor([[0.4, -0.1, 0.1], [-0.3, -0.1, 0.0]]))
    assert torch.allclose(w[0], torch.tensor([0.4, -0.1, 0.1]) / 0.4)
    assert torch.allclose(w[1], torch.tensor([-0.75, -0.25, 0.0]))
    assert rule.tolist() == [1, 2]


def test_memory_bounded_over_100_explanations():
    model = tiny_open_clip(image_size=16, patch_size=8, width=8, layers=1, heads=2, embed_dim=4, with_text=False)
    backend = get_backend(model)
    cci = ConceptClusterImportance(model, num_clusters=2, kmeans_iters=3)
    px = torch.randn(1, 3, 16, 16)
    text = torch.randn(1, 4)
    for _ in range(5):
        cci(px, text)
    gc.collect()
    tracemalloc.start()
    n0 = len(gc.get_objects())
    base, _ = tracemalloc.get_traced_memory()
    for _ in range(100):
        out = cci(px, text)
        assert out.maps.grad_fn is None
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(gc.get_objects()) - n0 < 200
    assert grown < 2_000_000
    assert all(len(m._forward_pre_hooks) == 0 and len(m._forward_hooks) == 0 for m in model.modules())
    assert backend.encoder is model.transformer


def test_cluster_key_mask_layout():
    labels = torch.tensor([[0, 1, 1, 0]])
    m = cluster_key_mask(labels, 2)
    assert m.tolist() == [[False, True, False, False, True], [False, False, True, True, False]]


def test_identical_patches_give_an_empty_cluster_and_no_nan():
    """All-blue image on the known-answer model: every patch token is the same, so one of
    K = 2 clusters stays empty (drop 0) and nothing carries the evidence -> zero map."""
    model = known_answer_open_clip()
    img = torch.zeros(1, 3, 16, 16)
    img[:, 2] = 1.0
    out = ConceptClusterImportance(model, num_clusters=2)(img, torch.tensor([0.0, 1.0, 0.0, 0.0]))
    assert torch.isfinite(out.maps).all() and torch.isfinite(out.drops).all()
    assert len(set(out.labels[0].tolist())) == 1
    assert out.drops.abs().max() < 1e-6 and out.normalizer.tolist() == [0] and out.maps.abs().max() == 0


def test_world_clip_wrapper_is_explained_through_its_inner_clip():
    import concept_grounding.models.clip as clip_mod

    model = clip_mod.WorldCLIP(
        ["a", "bird"],
        image_size=32,
        patch_size=8,
        vision_width=32,
        vision_layers=1,
        text_width=32,
        text_layers=1,
        head_width=16,
        embed_dim=8,
    ).eval()
    backend = get_backend(model)
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(backend.encode_image((x - 0.5) / 0.25), model.encode_image(x), atol=1e-6)
    out = ConceptClusterImportance(model, num_clusters=3)((x - 0.5) / 0.25, ["a bird"])
    assert out.maps.shape == (2, 32, 32)


def test_transformers_without_attention_interface(models, monkeypatch):
    """On a transformers release without AttentionInterface, masking the model's own forward
    raises one clear error and the fast path falls back to the same attention formula."""
    import transformers

    backend = get_backend(models["transformers"])
    gen = torch.Generator().manual_seed(11)
    px = torch.randn(1, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 2, (1, backend.num_patches), generator=gen)
    with torch.no_grad():
        expected = _deleted_reference(backend, px, labels, 2)
        monkeypatch.setattr(transformers, "AttentionInterface", None)  # as on a release without it
        with pytest.raises(ValueError, match="AttentionInterface"):
            masked_embeddings_reference(backend, px, labels, 2)
        assert backend.attention_config._attn_implementation == "sdpa"
        fast = masked_embeddings_fast(backend, unmasked_trace(backend, px), labels, 2)
    assert torch.allclose(fast, expected, atol=1e-5, rtol=0)
