"""Baseline saliency maps for a CLIP ViT, to compare against CCI on the same images.

* :func:`random_maps` — seeded uniform noise (the floor any method must beat);
* :func:`gradcam_maps` — Grad-CAM (Selvaraju et al. 2017) on the last block, ViT style:
  activations are the last block's normalised input tokens ``h = norm1(x)`` (as
  pytorch-grad-cam does with ``blocks[-1].norm1``, since the last block's *output* patch
  tokens do not reach the CLS token), channel weights are the patch-averaged gradients of
  ``cos(z, t)``, the map is ``ReLU(Σ_c α_c h_c)`` on the patch grid;
* :func:`grad_eclip_maps` — Grad-ECLIP (Zhao et al., ICML 2024), the runner-up to CCI in the
  CCI paper's faithfulness table: with ``o`` the last block's attention output (before
  the output projection), ``w = ∂cos(z, t)/∂o_CLS`` the channel weights, ``v_i`` the
  last block's values and ``λ_i`` the "loosened attention" (the cosine of the CLS query
  and key ``i`` after the output projection, min-max normalised over the patches, as in
  the authors' code), the map is ``ReLU(Σ_c w_c v_ic λ_i)``. The authors' code recomputes
  the last block with a single head; here the gradient is the model's own (multi-head);
* :func:`maskclip_maps` — MaskCLIP (Zhou et al., ECCV 2022), a row of both CCI tables: the
  last block's query-key attention is dropped and every token keeps its own value path
  (``x + out(v(norm1(x)))``, then the block's MLP with its residual, as the authors' ViT code
  does with ``v``; the same path as Grad-ECLIP's reference code), each patch token goes
  through the pooling head (final norm and projection) into the joint space, and the map is
  its cosine with ``t``. With ``class_embeds`` (a class set, e.g. every class prompt) the map
  is MaskCLIP's segmentation read-out instead: the probability of ``t`` against the set,
  ``softmax(100 cos)``. Not done: the paper's key smoothing and prompt denoising (both
  refine a segmentation over a class set; on the world CLIP below, averaging every patch's
  read-out over the patches weighted by their key cosines lowered it to 0.48), and
  Grad-ECLIP's code's extra weighting of the cosine by the CLS key's cosine with each key
  (0.54 there). Checked against open_clip's
  own last block run with a diagonal attention mask (both read-outs), and on a value-path
  model whose answer is closed-form (world birds' exact masks: foreground above background).
  Known answer on the trained world CLIP of ``tests/cci/test_cci_tables.py`` (2 layers, 64 px,
  five classes, seed 0; held-out birds 300-379, share of birds whose map is higher on the
  bird than off it): the class-set read-out 0.775 (CCI 0.775, random 0.51), the bare cosine
  0.41. The world draws each bird's scene independently of its species, so the background
  holds no class information; the bare cosine loses because this model's bird patches point
  away from what all five prompts share (mean cosine with the five: -0.07 on patches more
  than half bird, +0.03 on patches under 5 % bird) while only they tell the classes apart
  (a bird patch's nearest prompt is its class's for 46 %, a background patch's for 23 %,
  chance 20 %); the read-out cancels the shared part. Neither holds for every training seed:
  over seeds 0-3 (80 birds each) the bare cosine gave 0.41 / 0.74 / 0.71 / 0.54, the read-out
  0.78 / 0.80 / 0.84 / 0.55, CCI 0.78 / 0.79 / 0.84 / 0.91; a tiny CLIP's patch tokens are
  never trained to match the prompts. A world with a plain backdrop (``scene="plain"``, no
  background information at all) is no cleaner: bare 0.78 / 0.99 / 0.45 / 0.38, read-out
  0.76 / 0.76 / 0.80 / 0.59, CCI 0.80 / 0.58 / 0.54 / 0.78: after a first layer a token holds
  more than its own pixels. The known answer that does not depend on the seed is a world CLIP
  that can only read the bird: one layer (each patch's value path is a function of its own
  pixels) on the plain backdrop (``tests/cci/test_cci_maskclip.py``; 40 birds per class, 10
  epochs, held-out birds 200-279, seeds 0-3): MaskCLIP 0.90 / 0.94 / 0.99 / 0.94, the
  read-out 0.80 / 0.80 / 0.80 / 0.81, CCI 0.70 / 0.96 / 0.81 / 0.84, random 0.44 (one layer on
  the varied scenes, 60 birds per class, 15 epochs: MaskCLIP 0.58 / 0.71 / 0.75 / 0.65, the
  read-out 0.78 / 0.74 / 0.73 / 0.73, CCI 0.76 / 0.83 / 0.85 / 0.84);
* :func:`rollout_maps` — attention rollout (Abnar & Zuidema 2020): ``Â_l = ½(A_l + I)``
  with ``A_l`` the head-averaged attention, rows renormalised, ``R = Â_L … Â_1``; the map is
  the CLS row over the patches (text-independent).

All maps are ``(B, H, W)``, bilinearly upsampled from the ``(gh, gw)`` patch grid.
:data:`BASELINES` (name -> function), :data:`BASELINE_TITLES` and :func:`baseline_caption`
are the one list of baselines: the explain job, COVAR and the Space's Explain tab take
theirs from here (this module imports no torch until a map is computed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backends import get_backend

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["BASELINES", "baseline_caption"]


def _upsample(patch: "torch.Tensor", image_size: tuple[int, int]) -> "torch.Tensor":
    import torch.nn.functional as F

    return F.interpolate(patch[:, None].float(), size=tuple(image_size), mode="bilinear", align_corners=False)[:, 0]


def random_maps(model: Any, pixel_values: "torch.Tensor", text_embeds: Any = None, seed: int = 0) -> "torch.Tensor":
    """Seeded uniform random maps, ``(B, H, W)``."""
    import torch

    b, _, h, w = pixel_values.shape
    return torch.rand(b, h, w, generator=torch.Generator().manual_seed(seed)).to(pixel_values.device)


def gradcam_maps(model: Any, pixel_values: "torch.Tensor", text_embeds: "torch.Tensor") -> "torch.Tensor":
    """Grad-CAM on the last block for the score ``cos(z, t)``.

    Args:
        model: CLIP model or backend.
        pixel_values: ``(B, 3, H, W)``.
        text_embeds: ``(B, E)`` or ``(E,)``.

    Returns:
        ``(B, H, W)`` non-negative maps.
    """
    import torch
    import torch.nn.functional as F

    be = get_backend(model)
    be.check_eval()
    ops = be.blocks()
    t = text_embeds if text_embeds.ndim == 2 else text_embeds[None]
    with torch.no_grad():
        x = be.embed(pixel_values)
        for op in ops[:-1]:
            x = op.forward(x)
    with torch.enable_grad():
        h = ops[-1].norm1(x).detach().requires_grad_(True)
        out = ops[-1].forward(x.detach(), qkv=ops[-1].qkv(h))
        score = F.cosine_similarity(be.pool(out), t.to(out), dim=-1).sum()
        (grad,) = torch.autograd.grad(score, h)
    alpha = grad[:, 1:].mean(1, keepdim=True)  # (B, 1, D)
    cam = torch.relu((alpha * h.detach()[:, 1:]).sum(-1))
    return _upsample(cam.view(-1, *be.grid_size), be.image_size)


def grad_eclip_maps(
    model: Any, pixel_values: "torch.Tensor", text_embeds: "torch.Tensor", key_similarity: bool = True
) -> "torch.Tensor":
    """Grad-ECLIP maps for the score ``cos(z, t)`` (module docstring).

    Args:
        model: CLIP model or backend.
        pixel_values: ``(B, 3, H, W)``.
        text_embeds: ``(B, E)`` or ``(E,)``.
        key_similarity: weight each patch by the loosened attention ``λ_i`` (the paper's
            default); False drops it (the authors' "wo-ksim" variant). Where all patches are
            equally similar to the query (min = max), ``λ_i = 1``.

    Returns:
        ``(B, H, W)`` non-negative maps.
    """
    import torch
    import torch.nn.functional as F

    be = get_backend(model)
    be.check_eval()
    *body, last = be.blocks()
    t = text_embeds if text_embeds.ndim == 2 else text_embeds[None]
    with torch.no_grad():
        x = be.embed(pixel_values)
        for op in body:
            x = op.forward(x)
        q, k, v = last.qkv(last.norm1(x))
        o = last.attend(q, k, v)
    with torch.enable_grad():
        o = o.detach().requires_grad_(True)
        y = x + last.ls1(last.out(o))
        y = y + last.ls2(last.mlp(last.norm2(y)))
        score = F.cosine_similarity(be.pool(y), t.to(y), dim=-1).sum()
        (grad,) = torch.autograd.grad(score, o)
    with torch.no_grad():
        contribution = grad[:, :1] * v[:, 1:]  # (B, N, D)
        if key_similarity:
            sim = F.cosine_similarity(last.out(q[:, :1]), last.out(k[:, 1:]), dim=-1)  # (B, N)
            low, spread = sim.amin(1, keepdim=True), sim.amax(1, keepdim=True) - sim.amin(1, keepdim=True)
            flat = spread <= 1e-6  # every key equally similar: no spatial weighting (the reference divides 0 by 0)
            weight = torch.where(flat, torch.ones_like(sim), (sim - low) / spread.clamp_min(1e-12))
            contribution = contribution * weight[..., None]
        cam = torch.relu(contribution.sum(-1))
    return _upsample(cam.view(-1, *be.grid_size), be.image_size)


def maskclip_maps(model: Any, pixel_values: "torch.Tensor", text_embeds: "torch.Tensor",
                  class_embeds: "torch.Tensor | None" = None, temperature: float = 100.0) -> "torch.Tensor":
    """MaskCLIP maps for the text ``t`` (module docstring): ``cos(f_i, t)`` per patch ``i``, with
    ``f_i = P(norm(y_i))`` the patch's value-path feature in the joint space.

    Args:
        model: CLIP model or backend.
        pixel_values: ``(B, 3, H, W)``.
        text_embeds: ``(B, E)`` or ``(E,)``.
        class_embeds: optional ``(C, E)`` text embeddings of a class set (MaskCLIP's
            segmentation read-out): the map is then the probability of ``t`` against the set
            at each patch, ``softmax_j(temperature * cos(f_i, t_j))`` at ``t``, over ``t`` and
            the classes other than ``t`` (a class equal to ``t``, cosine > 1 - 1e-6, is left
            out, so ``t`` may be one of them). This removes the part of ``cos(f_i, t)`` that
            every class text shares.
        temperature: the softmax's inverse temperature (MaskCLIP's 100).

    Returns:
        ``(B, H, W)``: cosine similarities in [-1, 1], or probabilities in [0, 1] with
        ``class_embeds``.
    """
    import torch
    import torch.nn.functional as F

    be = get_backend(model)
    be.check_eval()
    *body, last = be.blocks()
    t = text_embeds if text_embeds.ndim == 2 else text_embeds[None]
    if class_embeds is not None and (class_embeds.ndim != 2 or class_embeds.shape[-1] != t.shape[-1]):
        raise ValueError(f"class_embeds: expected (C, {t.shape[-1]}) like the text, got {tuple(class_embeds.shape)}")
    with torch.no_grad():
        x = be.embed(pixel_values)
        for op in body:
            x = op.forward(x)
        _, _, v = last.qkv(last.norm1(x))
        y = x + last.ls1(last.out(v))  # each token attends to itself only: softmax over one key is 1
        y = y + last.ls2(last.mlp(last.norm2(y)))
        patches = be.project(be.final_norm(y[:, 1:]))  # (B, N, E)
        score = F.cosine_similarity(patches.float(), t.to(patches).float()[:, None], dim=-1)  # (B, N)
        if class_embeds is not None:
            score = _class_probability(patches.float(), t.to(patches).float(), class_embeds, temperature, score)
    return _upsample(score.view(-1, *be.grid_size), be.image_size)


def _class_probability(patches: "torch.Tensor", t: "torch.Tensor", class_embeds: "torch.Tensor",
                       temperature: float, score: "torch.Tensor") -> "torch.Tensor":
    """``(B, N)`` probability of ``t`` against ``class_embeds`` at each patch (see :func:`maskclip_maps`).

    ``patches`` ``(B, N, E)``, ``t`` ``(B, E)`` (any norm), ``score`` their ``(B, N)`` cosines,
    ``class_embeds`` ``(C, E)``."""
    import torch
    import torch.nn.functional as F

    c = F.normalize(class_embeds.to(patches), dim=-1)  # (C, E)
    others = F.normalize(patches, dim=-1) @ c.T  # (B, N, C)
    same = (F.normalize(t, dim=-1).expand(patches.shape[0], -1) @ c.T) > 1 - 1e-6  # (B, C): the class that is t
    others = others.masked_fill(same[:, None], float("-inf"))
    logits = float(temperature) * torch.cat([score[..., None], others], -1)
    return torch.softmax(logits, -1)[..., 0]


def rollout_maps(model: Any, pixel_values: "torch.Tensor", text_embeds: Any = None) -> "torch.Tensor":
    """Attention rollout maps ``(B, H, W)`` (text is ignored)."""
    import torch

    be = get_backend(model)
    be.check_eval()
    with torch.no_grad():
        x = be.embed(pixel_values)
        b, t, d = x.shape
        rollout = torch.eye(t, device=x.device).expand(b, t, t)
        eye = torch.eye(t, device=x.device)
        for op in be.blocks():
            q, k, v = op.qkv(op.norm1(x))
            hd = d // op.num_heads
            qh = q.view(b, t, op.num_heads, hd).transpose(1, 2)
            kh = k.view(b, t, op.num_heads, hd).transpose(1, 2)
            att = torch.softmax(qh @ kh.transpose(-1, -2) * hd**-0.5, dim=-1).mean(1)
            att = 0.5 * att + 0.5 * eye
            att = att / att.sum(-1, keepdim=True)
            rollout = att @ rollout
            x = op.forward(x, qkv=(q, k, v))
        cls = rollout[:, 0, 1:]
    return _upsample(cls.reshape(b, *be.grid_size), be.image_size)


#: name -> map function ``(model, pixel_values, text_embeds) -> (B, H, W)``
BASELINES = {"random": random_maps, "gradcam": gradcam_maps, "grad-eclip": grad_eclip_maps, "maskclip": maskclip_maps,
             "rollout": rollout_maps}
#: name -> title for figures and reports
BASELINE_TITLES = {"random": "random", "gradcam": "Grad-CAM", "grad-eclip": "Grad-ECLIP", "maskclip": "MaskCLIP",
                   "rollout": "rollout"}
#: the baselines whose map ignores the text -> what their caption says instead of the text
TEXT_FREE_BASELINES = {"random": "floor", "rollout": "text-free"}


def baseline_caption(name: str, text: str) -> str:
    """Caption of baseline ``name``'s map for ``text`` (the Space's gallery): the title and the
    text, or for a text-free baseline what it is instead.

    >>> baseline_caption("gradcam", "a photo of a bird")
    'Grad-CAM: a photo of a bird'
    >>> baseline_caption("rollout", "a photo of a bird")
    'rollout (text-free)'
    """
    title = BASELINE_TITLES[name]
    return f"{title} ({TEXT_FREE_BASELINES[name]})" if name in TEXT_FREE_BASELINES else f"{title}: {text}"
