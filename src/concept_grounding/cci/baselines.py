"""Baseline saliency maps for a CLIP ViT, compared against CCI on the same images (CCI, Tables 1-2):
random, Grad-CAM, Grad-ECLIP, MaskCLIP and attention rollout, each ``(B, H, W)``, bilinearly upsampled
from the ``(gh, gw)`` patch grid.

:data:`BASELINES` (name -> function), :data:`BASELINE_TITLES` and :func:`baseline_caption` are the one
list of baselines: the explain job, COVAR and the Space's Explain tab take theirs from here (this
module imports no torch until a map is computed). Formulas and known answers: docs/cci.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backends import get_backend

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["BASELINES", "baseline_caption"]


def _upsample(patch: torch.Tensor, image_size: tuple[int, int]) -> torch.Tensor:
    import torch.nn.functional as F

    return F.interpolate(patch[:, None].float(), size=tuple(image_size), mode="bilinear", align_corners=False)[:, 0]


def random_maps(model: Any, pixel_values: torch.Tensor, text_embeds: Any = None, seed: int = 0) -> torch.Tensor:
    """Seeded uniform random maps, ``(B, H, W)``."""
    import torch

    b, _, h, w = pixel_values.shape
    return torch.rand(b, h, w, generator=torch.Generator().manual_seed(seed)).to(pixel_values.device)


def gradcam_maps(model: Any, pixel_values: torch.Tensor, text_embeds: torch.Tensor) -> torch.Tensor:
    """Grad-CAM (Selvaraju et al. 2017) on the last block for the score ``cos(z, t)``, ViT style:
    activations are the last block's normalised input tokens ``h = norm1(x)`` (as pytorch-grad-cam
    does with ``blocks[-1].norm1``: the last block's *output* patch tokens do not reach the CLS
    token), channel weights ``α_c`` the patch-averaged gradients, the map ``ReLU(Σ_c α_c h_c)``.

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
    model: Any, pixel_values: torch.Tensor, text_embeds: torch.Tensor, key_similarity: bool = True
) -> torch.Tensor:
    """Grad-ECLIP maps (Zhao et al., ICML 2024) for the score ``cos(z, t)``: ``ReLU(Σ_c w_c v_ic λ_i)``,
    ``w = ∂cos(z, t)/∂o_CLS`` over the last block's attention output ``o``, ``v_i`` its values and
    ``λ_i`` the "loosened attention" (docs/cci.md). The gradient is the model's own (multi-head).

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


def maskclip_maps(
    model: Any,
    pixel_values: torch.Tensor,
    text_embeds: torch.Tensor,
    class_embeds: torch.Tensor | None = None,
    temperature: float = 100.0,
) -> torch.Tensor:
    """MaskCLIP maps (Zhou et al., ECCV 2022; docs/cci.md) for the text ``t``: ``cos(f_i, t)`` per patch ``i``, with
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


def _class_probability(
    patches: torch.Tensor, t: torch.Tensor, class_embeds: torch.Tensor, temperature: float, score: torch.Tensor
) -> torch.Tensor:
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


def rollout_maps(model: Any, pixel_values: torch.Tensor, text_embeds: Any = None) -> torch.Tensor:
    """Attention rollout maps ``(B, H, W)`` (Abnar & Zuidema 2020; text is ignored): ``Â_l = ½(A_l + I)``
    with ``A_l`` the head-averaged attention, rows renormalised, ``R = Â_L … Â_1``; the map is the CLS
    row over the patches."""
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
BASELINES = {
    "random": random_maps,
    "gradcam": gradcam_maps,
    "grad-eclip": grad_eclip_maps,
    "maskclip": maskclip_maps,
    "rollout": rollout_maps,
}
#: name -> title for figures and reports
BASELINE_TITLES = {
    "random": "random",
    "gradcam": "Grad-CAM",
    "grad-eclip": "Grad-ECLIP",
    "maskclip": "MaskCLIP",
    "rollout": "rollout",
}
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
