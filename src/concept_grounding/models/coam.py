"""Concept activation maps (CoAM, Aysel et al., Sec. 3.1) and overlays a person can look at.

For image ``i`` with pre-pooling feature map ``E_i`` (``H x W x d``) and concept vector
``c_j`` (a row of the concept bank ``C``, ``L x d``)::

    F_ij = (1/d) * sum_k c_jk * E_i(:, :, k)                    (Aysel et al., Eq. 6)

i.e. the CAV applied at every location before global average pooling; since GAP is
linear, the mean of ``F_ij`` over the grid equals ``(1/d) c_j . f(X_i)``. For a ViT, ``E``
is the patch-token grid ``(B, N, d)``, reshaped to ``(B, h, w, d)`` (``N = h w``, no CLS).

>>> import torch
>>> E = torch.zeros(1, 2, 1, 2)           # (B, d=2, H=1, W=2)
>>> E[0, :, 0, 0] = torch.tensor([1., 3.]); E[0, :, 0, 1] = torch.tensor([2., -2.])
>>> concept_activation_maps(E, torch.tensor([[1., 1.]])).tolist()   # (1/2)(1+3), (1/2)(2-2)
[[[[2.0, 0.0]]]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

__all__ = [
    "concept_activation_maps",
    "class_activation_maps",
    "upsample_maps",
    "overlay_heatmap",
    "coam_overlays",
    "save_coam_gallery",
]


#: Figs. 3-4's existence marks: the concept is in the image's ground truth / it is not.
CHECK, CROSS = "\u2713", "\u2717"


def concept_activation_maps(
    features: torch.Tensor, concept_vectors: torch.Tensor, grid_size: tuple[int, int] | None = None
) -> torch.Tensor:
    """CoAM ``F`` for every image and concept.

    Args:
        features: CNN map ``(B, d, H, W)`` or ViT patch grid ``(B, N, d)`` (patch tokens only).
        concept_vectors: the concept bank ``C`` ``(L, d)``.
        grid_size: ``(h, w)`` of a ViT grid; default ``sqrt(N)`` square.

    Returns:
        ``(B, L, h, w)`` maps in the units of ``c_j . E`` divided by ``d``.
    """
    if concept_vectors.ndim != 2:
        raise ValueError(f"concept_vectors must be (L, d), got {tuple(concept_vectors.shape)}")
    d = concept_vectors.shape[1]
    if features.ndim == 3:  # ViT: (B, N, d) -> (B, d, h, w)
        b, n, fd = features.shape
        if grid_size is None:
            side = math.isqrt(n)
            if side * side != n:
                raise ValueError(f"cannot infer a square grid from N={n} tokens (drop the CLS token or pass grid_size)")
            grid_size = (side, side)
        if grid_size[0] * grid_size[1] != n:
            raise ValueError(f"grid_size {grid_size} does not hold N={n} tokens")
        features = features.transpose(1, 2).reshape(b, fd, grid_size[0], grid_size[1])
    if features.ndim != 4:
        raise ValueError(f"features must be (B, d, H, W) or (B, N, d), got {tuple(features.shape)}")
    if features.shape[1] != d:
        raise ValueError(f"feature depth {features.shape[1]} differs from the concept vectors' d={d}")
    return torch.einsum("ld,bdhw->blhw", concept_vectors.to(features.dtype), features) / d


def class_activation_maps(concept_maps: torch.Tensor, theta: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """Class-wise CoAM (Aysel et al., Fig. 4's right column): ``G_ik = sum_j theta_jk F_ij``.

    *Decision* (the paper shows these maps but gives no formula): the concept maps carried
    through the linear classifier, as CAM carries a feature map through its head. With
    ``u = C f(X)`` (the ``"dot"`` score) the grid mean of ``G_ik`` times ``d`` is the class
    logit minus its bias, so the map splits the logit over the image.

    Args:
        concept_maps: ``F`` ``(B, L, h, w)``; theta: ``(L, K)``; classes: ``(B,)`` the class
            ``k`` of each image (e.g. its prediction).

    Returns:
        ``(B, h, w)``.

    >>> F = torch.zeros(1, 2, 1, 2); F[0, 0, 0, 0] = 1.0; F[0, 1, 0, 1] = 1.0
    >>> class_activation_maps(F, torch.tensor([[2.0], [-1.0]]), torch.tensor([0])).tolist()
    [[[2.0, -1.0]]]
    """
    if concept_maps.ndim != 4 or theta.ndim != 2 or theta.shape[0] != concept_maps.shape[1]:
        raise ValueError(
            f"concept_maps must be (B, L, h, w) and theta (L, K) with the same L, got "
            f"{tuple(concept_maps.shape)} and {tuple(theta.shape)}"
        )
    weights = theta.T.to(concept_maps.dtype)[torch.as_tensor(classes, dtype=torch.long)]  # (B, L)
    return torch.einsum("bl,blhw->bhw", weights, concept_maps)


def upsample_maps(maps: torch.Tensor, size: int | tuple[int, int], mode: str = "bilinear") -> torch.Tensor:
    """``(B, L, h, w)`` -> ``(B, L, H, W)`` by interpolation (for display and CLM)."""
    size = (size, size) if isinstance(size, int) else tuple(size)
    if maps.ndim != 4:
        raise ValueError(f"maps must be (B, L, h, w), got {tuple(maps.shape)}")
    kwargs = {"align_corners": False} if mode in ("bilinear", "bicubic") else {}
    return F.interpolate(maps, size=size, mode=mode, **kwargs)


def _to_uint8_image(image) -> np.ndarray:
    if isinstance(image, torch.Tensor):
        array = image.detach().cpu().float()
        if array.ndim == 3 and array.shape[0] in (1, 3):
            array = array.permute(1, 2, 0)
        return (array.clamp(0, 1).numpy() * 255).round().astype(np.uint8)
    return np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.uint8)


def overlay_heatmap(image, heatmap, alpha: float = 0.5, cmap: str = "jet"):
    """A PIL image: ``image`` (PIL, ``(3, H, W)`` tensor in [0, 1] or ``(H, W, 3)`` uint8)
    blended with ``heatmap`` ``(h, w)`` (min-max scaled, resized to the image, coloured by ``cmap``).

    >>> import torch
    >>> overlay_heatmap(torch.rand(3, 16, 16), torch.rand(4, 4)).size
    (16, 16)
    """
    from matplotlib import colormaps
    from PIL import Image

    rgb = _to_uint8_image(image)
    heat = torch.as_tensor(np.asarray(heatmap), dtype=torch.float32)
    if heat.ndim != 2:
        raise ValueError(f"heatmap must be (h, w), got {tuple(heat.shape)}")
    heat = upsample_maps(heat[None, None], rgb.shape[:2])[0, 0]
    low, high = float(heat.min()), float(heat.max())
    heat = (heat - low) / (high - low) if high > low else torch.zeros_like(heat)
    coloured = (colormaps[cmap](heat.numpy())[..., :3] * 255).astype(np.float32)
    blend = (1 - alpha) * rgb.astype(np.float32) + alpha * coloured
    return Image.fromarray(blend.clip(0, 255).astype(np.uint8))


def coam_overlays(
    image,
    maps: torch.Tensor,
    *,
    coloured: bool = True,
    threshold: float = 0.5,
    beta: float = 0.4,
    cmap: str = "jet",
) -> list:
    """Aysel et al.'s Algorithm 2 (App. E): one superimposed image per concept map.

    Each map is resized to the image (bilinear) and min-max scaled to [0, 1]. ``coloured``:
    ``beta * jet(heatmap) + X`` (clipped to [0, 255]; the algorithm's line 8).
    Otherwise the binary branch (lines 11-12): ``X * 1[heatmap >= threshold]``, the image
    masked to the map's strongest region. *Decision*: the threshold acts on the min-max
    scaled map (the paper names no scale); a constant map keeps no pixel.

    Args:
        image: PIL, ``(3, H, W)`` tensor in [0, 1] or ``(H, W, 3)`` uint8.
        maps: ``(L, h, w)`` CoAMs of that image.
        threshold: in [0, 1]; beta: the heatmap's opacity.

    Returns:
        ``L`` PIL images.

    >>> m = torch.zeros(1, 2, 2); m[0, 0, 0] = 1.0
    >>> out = coam_overlays(torch.ones(3, 4, 4), m, coloured=False, threshold=0.7)  # upsampled row 0: 1, .75, .25, 0
    >>> (np.asarray(out[0])[..., 0] > 0).astype(int).tolist()[0]
    [1, 1, 0, 0]
    """
    from matplotlib import colormaps
    from PIL import Image

    if not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold must be in [0, 1] (the min-max scaled map), got {threshold}")
    maps = torch.as_tensor(np.asarray(maps), dtype=torch.float32)
    if maps.ndim != 3:
        raise ValueError(f"maps must be (L, h, w), got {tuple(maps.shape)}")
    rgb = _to_uint8_image(image).astype(np.float32)
    heat = upsample_maps(maps[None], rgb.shape[:2])[0]
    low, high = heat.amin(dim=(1, 2), keepdim=True), heat.amax(dim=(1, 2), keepdim=True)
    heat = torch.where(high > low, (heat - low) / (high - low).clamp_min(1e-12), torch.zeros_like(heat)).numpy()
    out = []
    for h in heat:
        if coloured:
            picture = beta * colormaps[cmap](h)[..., :3] * 255 + rgb
        else:
            picture = rgb * ((h >= threshold) & (h.max() > 0))[..., None]
        out.append(Image.fromarray(np.clip(picture, 0, 255).astype(np.uint8)))
    return out


def save_coam_gallery(
    images: Sequence,
    maps: torch.Tensor,
    path: str | Path,
    concept_names: Sequence[str] | None = None,
    row_titles: Sequence[str] | None = None,
    alpha: float = 0.5,
    cmap: str = "jet",
    marks: Sequence[Sequence[bool]] | np.ndarray | None = None,
    class_maps: torch.Tensor | None = None,
    class_titles: Sequence[str] | None = None,
) -> Path:
    """A PNG grid: one row per image (the image, then one overlay per concept map), as
    Aysel et al.'s Figs. 3-4.

    Args:
        images: ``B`` images (PIL or ``(3, H, W)`` tensors in [0, 1]).
        maps: ``(B, L, h, w)`` CoAMs (e.g. for each image's top concepts, already selected).
        concept_names: ``L`` column titles shared by all rows, or one list of ``L`` per image
            (e.g. each image's own top concepts).
        row_titles: ``B`` titles for the image column (e.g. the class).
        marks: ``(B, L)`` bool, whether each shown concept is in the image's ground truth;
            titles get a check mark (present) or a cross (absent), as Figs. 3-4.
        class_maps: ``(B, h, w)`` class-wise maps (:func:`class_activation_maps`), drawn as a
            last column (Fig. 4's right), titled by ``class_titles``.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    b, n_maps = maps.shape[:2]
    if len(images) != b:
        raise ValueError(f"{len(images)} images but maps has {b}")
    if marks is not None and np.shape(marks) != (b, n_maps):
        raise ValueError(f"marks must be (B={b}, L={n_maps}), got {np.shape(marks)}")
    if class_maps is not None and len(class_maps) != b:
        raise ValueError(f"class_maps must hold B={b} maps, got {len(class_maps)}")
    extra = 0 if class_maps is None else 1
    fig, axes = plt.subplots(b, n_maps + 1 + extra, figsize=(2.0 * (n_maps + 1 + extra), 2.0 * b), squeeze=False)
    for i in range(b):
        axes[i, 0].imshow(_to_uint8_image(images[i]))
        axes[i, 0].set_title(row_titles[i] if row_titles else "image", fontsize=7)
        for j in range(n_maps):
            axes[i, j + 1].imshow(overlay_heatmap(images[i], maps[i, j], alpha, cmap))
            title = ""
            if concept_names is not None:
                row = concept_names[i] if not isinstance(concept_names[0], str) else concept_names
                title = str(row[j]).replace("has_", "")
            if marks is not None:
                title = f"{CHECK if marks[i][j] else CROSS} {title}"
            if title:
                axes[i, j + 1].set_title(title, fontsize=6)
        if class_maps is not None:
            axes[i, -1].imshow(overlay_heatmap(images[i], class_maps[i], alpha, cmap))
            axes[i, -1].set_title(f"class map: {class_titles[i]}" if class_titles else "class map", fontsize=6)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
