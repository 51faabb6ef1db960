"""Deletion/Insertion curves, replacements and baseline maps (known answers)."""

from __future__ import annotations

import pytest
import torch

from concept_grounding.cci.baselines import (
    BASELINES,
    grad_eclip_maps,
    gradcam_maps,
    random_maps,
    rollout_maps,
)
from concept_grounding.cci.faithfulness import (
    Replacement,
    classification_curves,
    perturbed,
    pixel_order,
    retrieval_curves,
)
from concept_grounding.testing import known_answer_open_clip, tiny_open_clip


def _object_image():
    """1x1x4x4 image, 1 on a 4-pixel object R (top-left block), 0 elsewhere."""
    img = torch.zeros(1, 1, 4, 4)
    img[0, 0, :2, :2] = 1.0
    return img


def _score(x):
    """Class 0 logit = evidence summed over R; class 1 logit = 1.5."""
    ev = x[:, 0, :2, :2].sum((1, 2))
    return torch.stack([ev, torch.full_like(ev, 1.5)], dim=1)


def test_deletion_auc_known_answer():
    img = _object_image()
    oracle = img[:, 0].clone()  # R first
    reverse = 1 - oracle  # R last
    rep = Replacement("mean")  # replacement value 0.25 everywhere
    good = classification_curves(_score, img, oracle, torch.tensor([0]), steps=16, replacement=rep)
    bad = classification_curves(_score, img, reverse, torch.tensor([0]), steps=16, replacement=rep)
    # oracle: R pixels deleted at k=1..4, evidence 4 - 0.75k > 1.5 until k = 4 -> curve 1,1,1,1,0,...
    assert good.curves["Del@1"].tolist() == [1.0] * 4 + [0.0] * 13
    assert good.aucs["Del@1"] == pytest.approx(3.5 / 16)
    assert bad.aucs["Del@1"] == pytest.approx(15.5 / 16)
    assert good.aucs["Del@5"] == pytest.approx(1.0)  # two classes: top-5 always right
    # insertion from the mean image: R revealed first -> right once 0.25*4 + 0.75k > 1.5, k >= 1
    assert good.curves["Ins@1"].tolist() == [0.0] + [1.0] * 16
    assert good.aucs["Ins@1"] > bad.aucs["Ins@1"]


def test_perturbed_endpoints_and_order():
    img = torch.arange(16.0).view(1, 1, 4, 4)
    base = torch.full_like(img, -1.0)
    rank = pixel_order(img[:, 0])
    assert rank[0, 3, 3] == 0 and rank[0, 0, 0] == 15
    assert torch.equal(perturbed(img, base, rank, 0.0, "deletion"), img)
    assert torch.equal(perturbed(img, base, rank, 1.0, "deletion"), base)
    half = perturbed(img, base, rank, 0.5, "insertion")
    assert (half[0, 0, 2:] >= 8).all() and (half[0, 0, :2] == -1).all()
    with pytest.raises(ValueError, match="mode"):
        perturbed(img, base, rank, 0.5, "erase")


def test_replacements():
    img = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    mean = Replacement("mean")(img)
    assert torch.allclose(mean, img.mean((2, 3), keepdim=True).expand_as(img))
    const = torch.full((1, 3, 8, 8), 0.3)
    assert torch.allclose(Replacement("blur", sigma=2.0)(const), const, atol=1e-6)
    blurred = Replacement("blur", sigma=2.0)(img)
    assert blurred.std() < img.std()
    a, b = Replacement("noise", seed=3)(img), Replacement("noise", seed=3)(img)
    assert torch.equal(a, b) and not torch.allclose(a, img)
    with pytest.raises(ValueError, match="kind"):
        Replacement("zeros")


def test_retrieval_curves():
    gen = torch.Generator().manual_seed(0)
    imgs = torch.rand(4, 3, 8, 8, generator=gen)
    embed = lambda x: x.flatten(1)  # noqa: E731
    out = retrieval_curves(
        embed, imgs.flatten(1), imgs, torch.rand(4, 8, 8, generator=gen), steps=4, replacement=Replacement("mean")
    )
    assert set(out.curves) == {f"{m}-{d}@{k}" for m in ("Del", "Ins") for d in ("TR", "IR") for k in (1, 5)}
    assert out.curves["Del-TR@1"][0] == 1.0 and out.curves["Ins-IR@1"][-1] == 1.0
    assert out.curves["Del-TR@5"].eq(1.0).all()  # 4 candidates: top-5 always hits
    with pytest.raises(ValueError, match="text_embeds"):
        retrieval_curves(embed, imgs.flatten(1)[:3], imgs, torch.rand(4, 8, 8))
    with pytest.raises(ValueError, match="maps"):
        classification_curves(_score, imgs, torch.rand(4, 4, 4), torch.zeros(4, dtype=torch.long))


def _red_left():
    img = torch.zeros(1, 3, 16, 16)
    img[:, 0, :, :8] = 1.0
    img[:, 2, :, 8:] = 1.0
    return img


def test_rollout_follows_the_attended_patches():
    model = known_answer_open_clip()
    maps = rollout_maps(model, _red_left())
    assert maps.shape == (1, 16, 16)
    assert maps[0, :, :6].min() > 10 * maps[0, :, 10:].max()


def test_grad_eclip_falls_on_the_only_tokens_that_carry_a_value():
    """Known-answer model: only red patches have a value, so Grad-ECLIP's map is zero on the
    blue half and the same positive number on every red patch (same value, key and weight).
    The text is the red value direction, so more red raises the score (at t = z the gradient
    of the cosine would vanish)."""
    model = known_answer_open_clip()
    red_value = torch.tensor([1.0, -1.0, 1.0, -1.0])
    for key_similarity in (True, False):
        maps = grad_eclip_maps(model, _red_left(), red_value, key_similarity=key_similarity)
        assert maps.shape == (1, 16, 16)
        red, blue = maps[0, :, :6], maps[0, :, 10:]
        assert blue.abs().max() == 0 and red.min() > 0
        assert torch.allclose(red, red[0, 0].expand_as(red))
    assert all(p.grad is None for p in model.parameters())


def test_grad_eclip_matches_a_gradient_through_open_clips_own_forward():
    """Without the key weighting the map is ``ReLU(w . v_i)``, ``w = ∂cos/∂o_CLS``. Reference:
    hooks on open_clip's last attention module (its input is ``ln_1(x)``, its output is
    ``W_o o + b_o``, so ``∂cos/∂o = W_o^T ∂cos/∂output``) and autograd through ``encode_image``."""
    import torch.nn.functional as F

    from concept_grounding.cci.backends import get_backend

    model = tiny_open_clip(layers=2)
    px = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    text = torch.randn(16, generator=torch.Generator().manual_seed(4))
    ours = grad_eclip_maps(model, px, text, key_similarity=False)

    attn = model.visual.transformer.resblocks[-1].attn
    seen = {}

    def keep_output(module, args, out):
        out[0].retain_grad()
        seen["a"] = out[0]

    hooks = [
        attn.register_forward_pre_hook(lambda m, args: seen.update(h=args[0].detach())),
        attn.register_forward_hook(keep_output),
    ]
    try:
        with torch.enable_grad():
            F.cosine_similarity(model.encode_image(px), text[None], dim=-1).sum().backward()
    finally:
        for h in hooks:
            h.remove()
        model.zero_grad(set_to_none=True)
    d = seen["h"].shape[-1]
    w = seen["a"].grad[:, 0] @ attn.out_proj.weight  # (1, D)
    v = seen["h"] @ attn.in_proj_weight[2 * d :].T + attn.in_proj_bias[2 * d :]  # (1, T, D)
    patch = torch.relu((w[:, None] * v[:, 1:]).sum(-1)).view(1, *get_backend(model).grid_size)
    reference = F.interpolate(patch[:, None], size=(32, 32), mode="bilinear", align_corners=False)[:, 0]
    assert reference.max() > 0
    assert torch.allclose(ours, reference, atol=1e-6, rtol=1e-4)


def test_gradcam_and_random_maps():
    model = tiny_open_clip()
    px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    text = torch.randn(2, 16, generator=torch.Generator().manual_seed(2))
    cam = gradcam_maps(model, px, text)
    assert cam.shape == (2, 32, 32) and torch.isfinite(cam).all() and (cam >= 0).all() and cam.max() > 0
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(random_maps(model, px, seed=4), random_maps(model, px, seed=4))
    assert set(BASELINES) == {"random", "gradcam", "grad-eclip", "maskclip", "rollout"}
    from concept_grounding.cci.baselines import BASELINE_TITLES
    from concept_grounding.space.tab_explain import BASELINES as SPACE_BASELINES

    assert tuple(BASELINES) == SPACE_BASELINES == tuple(BASELINE_TITLES)  # the Space lists them without importing torch


def test_cci_beats_random_on_known_answer_model():
    """Deleting the red object (CCI's map) kills the class faster than random deletion."""
    import torch.nn.functional as F

    from concept_grounding.cci import ConceptClusterImportance

    model = known_answer_open_clip()
    img = _red_left()
    cci = ConceptClusterImportance(model, num_clusters=2, upsample="nearest")
    emb = cci.embed(img)
    classes = torch.stack([emb.image_embeds[0], emb.masked_embeds[0, int(emb.labels[0, 0])]])
    out = cci.explain_embeddings(emb, classes[:1])

    def score(x):
        with torch.no_grad():
            return F.normalize(model(x), dim=-1) @ F.normalize(classes, dim=-1).T

    label = torch.tensor([0])
    rep = torch.zeros_like  # black: the red evidence is really gone
    ours = classification_curves(score, img, out.maps, label, steps=8, replacement=rep).aucs["Del@1"]
    rand = classification_curves(score, img, random_maps(model, img), label, steps=8, replacement=rep).aucs["Del@1"]
    # CCI's map is the red half: class 0 survives f = 0 .. 3/8 and dies at f = 1/2 when the
    # last red patch is gone -> trapezoid AUC (3 + 0.5) / 8. Random pixels leave every red
    # patch partly intact (LayerNorm restores its direction) until f is close to 1.
    assert ours == pytest.approx(3.5 / 8) and rand > 0.8


def _value_path_clip(query_key_seed: int | None = None, gain: float = 2.0):
    """One-layer open_clip ViT (width 8, one head, 4-px patches, 32 px) whose *value* path
    alone carries the text direction, from red pixels only.

    With Hadamard rows ``r, b, c, s`` (zero-mean, orthogonal, ``|.|^2 = 8``): red pixels embed
    to ``r``, blue ones to ``b``, the class token is ``c``; ``v(x) = gain (r . x / 8) s``; the
    output projection, the final projection and the LayerNorms' weights are identities, the
    MLP is zero. A patch with red share ``a`` has the MaskCLIP feature
    ``(a r + (1 - a) b + gain a s) / sigma`` (each LayerNorm only rescales zero-mean vectors),
    so its cosine with the text ``s`` is ``gain a / sqrt(a^2 + (1 - a)^2 + gain^2 a^2)``.
    The query and key weights are zero (uniform attention) or, with ``query_key_seed``,
    random: MaskCLIP drops the query-key attention, so its map must not change.
    """
    h2 = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    h = torch.kron(torch.kron(h2, h2), h2)  # Sylvester's 8 x 8 Hadamard matrix
    r, b, c, s = h[1], h[2], h[3], h[4]
    model = tiny_open_clip(32, 4, width=8, layers=1, heads=1, embed_dim=8, with_text=False)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        w = torch.zeros(8, 3, 4, 4)
        w[:, 0], w[:, 2] = r[:, None, None] / 16, b[:, None, None] / 16
        model.conv1.weight.copy_(w)
        model.class_embedding.copy_(c)
        blk = model.transformer.resblocks[0]
        for ln in (model.ln_pre, model.ln_post, blk.ln_1, blk.ln_2):
            ln.weight.fill_(1.0)
        wqk = (
            torch.zeros(16, 8)
            if query_key_seed is None
            else torch.randn(16, 8, generator=torch.Generator().manual_seed(query_key_seed))
        )
        blk.attn.in_proj_weight.copy_(torch.cat([wqk, gain * torch.outer(s, r) / 8]))
        blk.attn.out_proj.weight.copy_(torch.eye(8))
        model.proj.copy_(torch.eye(8))
    return model.eval(), s


def test_maskclip_ranks_the_exact_foreground_of_world_birds_above_the_background():
    """Known answer (:func:`_value_path_clip`): world birds drawn red on blue (the world's exact
    masks), the text the red value direction. MaskCLIP's map is the closed-form cosine of each
    patch's red share, so it is higher on every bird than off it; random query/key weights
    change the model's attention but not MaskCLIP's map (its attention is dropped)."""
    import torch.nn.functional as F

    from concept_grounding.cci.baselines import maskclip_maps
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=32, seed=0))
    masks = torch.stack([torch.from_numpy(world.sample(i).mask) for i in range(8)])
    px = torch.stack([masks.float(), torch.zeros_like(masks, dtype=torch.float32), (~masks).float()], 1)
    model, text = _value_path_clip()
    maps = maskclip_maps(model, px, text)
    a = F.avg_pool2d(masks[:, None].float(), 4)[:, 0]  # red share of each 4 x 4 patch
    gain = 2.0
    expected = F.interpolate(
        (gain * a / torch.sqrt(a**2 + (1 - a) ** 2 + gain**2 * a**2))[:, None],
        size=(32, 32),
        mode="bilinear",
        align_corners=False,
    )[:, 0]
    assert torch.allclose(maps, expected, atol=1e-4)
    for m, fg in zip(maps, masks):
        assert m[fg].mean() > m[~fg].mean() + 0.3
    shuffled, _ = _value_path_clip(query_key_seed=5)
    assert torch.allclose(maskclip_maps(shuffled, px, text), maps, atol=1e-6)
    assert not torch.allclose(shuffled(px), model(px), atol=1e-3)  # the attention itself did change


def test_stacked_and_shared_end_curves_equal_the_reference_curves():
    """Stacking every fraction's perturbations into forwards of any size, and sharing the
    clean / fully replaced ends, give the reference curves exactly (a score that sees every pixel)."""
    from concept_grounding.cci.faithfulness import curve_endpoints

    gen = torch.Generator().manual_seed(0)
    images, maps = torch.rand(5, 3, 8, 8, generator=gen), torch.rand(5, 8, 8, generator=gen)
    weights = torch.randn(7, 3 * 64, generator=gen)
    labels = torch.tensor([0, 3, 6, 2, 2])

    def score(x):
        return x.flatten(1) @ weights.T

    rep = Replacement("noise", seed=1)
    reference = classification_curves(score, images, maps, labels, steps=6, replacement=rep)
    ends = curve_endpoints(score, images, rep)
    for forward_batch in (1, 3, 5, 64):
        for endpoints in (None, ends):
            out = classification_curves(
                score, images, maps, labels, steps=6, replacement=rep, endpoints=endpoints, forward_batch=forward_batch
            )
            for name, curve in reference.curves.items():
                assert torch.equal(out.curves[name], curve), (forward_batch, endpoints is None, name)
    assert len(set(reference.curves["Del@1"].tolist())) > 1  # the curves move: the check can fail
