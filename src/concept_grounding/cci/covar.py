"""COVAR: controlled variants of (image, foreground mask) pairs (CVPR 2026 CCI, Sec. 4).

Each object is pasted on ``N`` backgrounds (20 by default, procedural here; the paper used Emu2
edits) and each background-varied image is expanded by 11 structural transforms plus the identity,
so there are ``N * 12`` rows per object. :func:`inpaint_backgrounds` is an optional generative path
through diffusers' ``AutoPipelineForInpainting``. The transforms (*decision* where the paper is
silent): docs/covar.md.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import datasets
    import torch

__all__ = ["procedural_backgrounds", "composite", "build_covar", "inpaint_backgrounds"]


@dataclass(frozen=True)
class StructuralTransform:
    """One COVAR transform; the parameters become dataset columns.

    Attributes:
        name: column ``transform``.
        family: ``identity``, ``scale``, ``viewpoint``, ``flip``, ``rotation``, ``translation``, ``crop``.
        scale: isotropic scale about the mask centroid.
        angle: rotation in degrees (counter-clockwise on screen).
        tx, ty: translation as fractions of width and height.
        shear: vertical shear (viewpoint).
        squash: horizontal foreshortening factor (viewpoint).
        hflip, vflip: mirror flags.
        crop: side of the central crop as a fraction of the image (1 = no crop).
    """

    name: str
    family: str
    scale: float = 1.0
    angle: float = 0.0
    tx: float = 0.0
    ty: float = 0.0
    shear: float = 0.0
    squash: float = 1.0
    hflip: bool = False
    vflip: bool = False
    crop: float = 1.0

    def object_matrix(self, centre: tuple[float, float], size: tuple[int, int]) -> np.ndarray:
        """3x3 pixel-space map input -> output of the object layer."""
        cx, cy = centre
        h, w = size
        to_c = np.array([[1, 0, -cx], [0, 1, -cy], [0, 0, 1]], float)
        back = np.array([[1, 0, cx + self.tx * w], [0, 1, cy + self.ty * h], [0, 0, 1]], float)
        a = math.radians(self.angle)
        rot = np.array([[math.cos(a), math.sin(a), 0], [-math.sin(a), math.cos(a), 0], [0, 0, 1]])
        lin = np.diag(
            [self.scale * self.squash * (-1 if self.hflip else 1), self.scale * (-1 if self.vflip else 1), 1.0]
        )
        shear = np.array([[1, 0, 0], [self.shear, 1, 0], [0, 0, 1]], float)
        return back @ shear @ rot @ lin @ to_c

    def scene_matrix(self, size: tuple[int, int]) -> np.ndarray:
        """3x3 pixel-space map of the scene-level crop (identity unless ``crop < 1``)."""
        h, w = size
        z = 1.0 / self.crop
        cx, cy = (w - 1) / 2, (h - 1) / 2
        return np.array([[z, 0, cx - z * cx], [0, z, cy - z * cy], [0, 0, 1]], float)


_YAW = math.radians(35)
#: identity + the 11 structural transforms
TRANSFORMS: tuple[StructuralTransform, ...] = (
    StructuralTransform("identity", "identity"),
    *(StructuralTransform(f"scale_{s}", "scale", scale=s) for s in (0.4, 0.6, 0.8, 1.25)),
    StructuralTransform("viewpoint_left", "viewpoint", squash=math.cos(_YAW), shear=0.15),
    StructuralTransform("viewpoint_right", "viewpoint", squash=math.cos(_YAW), shear=-0.15),
    StructuralTransform("hflip", "flip", hflip=True),
    StructuralTransform("vflip", "flip", vflip=True),
    StructuralTransform("rotate_30", "rotation", angle=30.0),
    StructuralTransform("translate", "translation", tx=0.25, ty=-0.15),
    StructuralTransform("crop", "crop", crop=0.6),
)


def procedural_backgrounds(n: int = 20, size: tuple[int, int] = (64, 64), seed: int = 0) -> list[np.ndarray]:
    """``n`` seeded backgrounds ``(H, W, 3) uint8`` cycling through five kinds:
    solid, vertical gradient, stripes, checkerboard, smooth noise (colours random)."""
    if n < 1:
        raise ValueError(f"num_backgrounds: must be >= 1, got {n}")
    h, w = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = []
    for i in range(n):
        c1, c2 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        kind = i % 5
        if kind == 0:
            t = np.zeros((h, w), np.float32)
        elif kind == 1:
            t = yy / max(h - 1, 1)
        elif kind == 2:
            period = rng.integers(4, 12)
            t = ((xx + yy * rng.uniform(-1, 1)) // period % 2).astype(np.float32)
        elif kind == 3:
            cell = rng.integers(4, 16)
            t = ((xx // cell + yy // cell) % 2).astype(np.float32)
        else:
            coarse = rng.uniform(0, 1, (5, 5)).astype(np.float32)
            ys = np.linspace(0, 4, h)
            xs = np.linspace(0, 4, w)
            t = np.stack([np.interp(xs, np.arange(5), row) for row in coarse])  # (5, w)
            t = np.stack([np.interp(ys, np.arange(5), col) for col in t.T], axis=1)  # (h, w)
        img = c1[None, None] * (1 - t[..., None]) + c2[None, None] * t[..., None]
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def _warp(layers: torch.Tensor, matrix: np.ndarray) -> torch.Tensor:
    """Warp ``(C, H, W)`` float layers by the pixel-space map ``matrix`` (nearest, zeros outside)."""
    import torch
    import torch.nn.functional as F

    _, h, w = layers.shape
    norm = np.array([[2 / w, 0, 1 / w - 1], [0, 2 / h, 1 / h - 1], [0, 0, 1]])
    theta = norm @ np.linalg.inv(matrix) @ np.linalg.inv(norm)
    grid = F.affine_grid(torch.tensor(theta[:2], dtype=torch.float32)[None], [1, 1, h, w], align_corners=False)
    return F.grid_sample(layers[None], grid, mode="nearest", padding_mode="zeros", align_corners=False)[0]


def apply_transform(
    image: np.ndarray, mask: np.ndarray, transform: StructuralTransform
) -> tuple[np.ndarray, np.ndarray]:
    """Move the object layer: ``(H, W, 3) uint8`` and ``(H, W) bool`` -> the same, aligned.

    Pixels outside the moved mask are 0 in the returned image.
    """
    import torch

    if image.shape[:2] != mask.shape:
        raise ValueError(f"mask: shape {mask.shape} differs from image {image.shape[:2]}")
    m = mask.astype(bool)
    ys, xs = np.nonzero(m)
    centre = (float(xs.mean()), float(ys.mean())) if len(xs) else ((m.shape[1] - 1) / 2, (m.shape[0] - 1) / 2)
    layers = torch.from_numpy(np.concatenate([image * m[..., None], m[..., None] * 255], axis=2).astype(np.float32))
    out = _warp(layers.permute(2, 0, 1), transform.object_matrix(centre, m.shape)).permute(1, 2, 0).numpy()
    return out[..., :3].astype(np.uint8), out[..., 3] > 127


def composite(obj: np.ndarray, mask: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Paste the object on the background: ``obj * mask + background * (1 - mask)``."""
    if background.shape != obj.shape:
        raise ValueError(f"background: shape {background.shape} differs from image {obj.shape}")
    return np.where(mask[..., None], obj, background).astype(np.uint8)


def _scene(image: np.ndarray, mask: np.ndarray, transform: StructuralTransform) -> tuple[np.ndarray, np.ndarray]:
    import torch

    if transform.crop >= 1.0:
        return image, mask
    layers = torch.from_numpy(np.concatenate([image, mask[..., None] * 255], axis=2).astype(np.float32))
    out = _warp(layers.permute(2, 0, 1), transform.scene_matrix(mask.shape)).permute(1, 2, 0).numpy()
    return out[..., :3].astype(np.uint8), out[..., 3] > 127


def covar_rows(
    image: np.ndarray,
    mask: np.ndarray,
    backgrounds: Sequence[np.ndarray],
    transforms: Sequence[StructuralTransform] = TRANSFORMS,
) -> Iterable[dict[str, Any]]:
    """All variants of one object: yields dicts with ``image``, ``mask`` and the parameters."""
    for b, bg in enumerate(backgrounds):
        for t in transforms:
            obj, m = apply_transform(image, mask, t)
            img, m = _scene(composite(obj, m, bg), m, t)
            yield {
                "image": img,
                "mask": m,
                "background": b,
                "transform": t.name,
                "family": t.family,
                "scale": t.scale,
                "angle": t.angle,
                "tx": t.tx,
                "ty": t.ty,
                "shear": t.shear,
                "squash": t.squash,
                "hflip": t.hflip,
                "vflip": t.vflip,
                "crop": t.crop,
            }


def covar_features(class_names: Sequence[str] | None = None) -> datasets.Features:
    """Columns of :func:`build_covar`."""
    import datasets

    label = datasets.ClassLabel(names=list(class_names)) if class_names else datasets.Value("int32")
    return datasets.Features(
        {
            "image": datasets.Image(),
            "mask": datasets.Image(),
            "label": label,
            "source_index": datasets.Value("int32"),
            "background": datasets.Value("int32"),
            "transform": datasets.Value("string"),
            "family": datasets.Value("string"),
            "scale": datasets.Value("float32"),
            "angle": datasets.Value("float32"),
            "tx": datasets.Value("float32"),
            "ty": datasets.Value("float32"),
            "shear": datasets.Value("float32"),
            "squash": datasets.Value("float32"),
            "hflip": datasets.Value("bool"),
            "vflip": datasets.Value("bool"),
            "crop": datasets.Value("float32"),
        }
    )


def build_covar(
    samples: Iterable[tuple[np.ndarray, np.ndarray, int]],
    num_backgrounds: int = 20,
    transforms: Sequence[StructuralTransform] = TRANSFORMS,
    class_names: Sequence[str] | None = None,
    seed: int = 0,
    backgrounds: Sequence[np.ndarray] | None = None,
) -> datasets.Dataset:
    """Build COVAR from ``(image (H,W,3) uint8, mask (H,W) bool, label)`` triples.

    Args:
        samples: the objects; all images must share one size.
        num_backgrounds: procedural backgrounds (ignored when ``backgrounds`` is given).
        transforms: defaults to identity + the 11 structural transforms.
        class_names: names for the ``label`` ClassLabel column.
        seed: background seed.
        backgrounds: your own ``(H, W, 3) uint8`` backgrounds (e.g. from
            :func:`inpaint_backgrounds`).

    Returns:
        A ``datasets.Dataset`` (in memory) with one row per (object, background, transform);
        masks are stored as L images (255 = object).
    """
    import datasets
    from PIL import Image
    from tqdm.auto import tqdm

    rows = []
    bgs = list(backgrounds) if backgrounds is not None else None
    for i, (image, mask, label) in enumerate(tqdm(list(samples), desc="COVAR", leave=False)):
        if bgs is None:
            bgs = procedural_backgrounds(num_backgrounds, image.shape[:2], seed)
        for row in covar_rows(image, mask, bgs, transforms):
            row["image"] = Image.fromarray(row["image"])
            row["mask"] = Image.fromarray(row["mask"].astype(np.uint8) * 255)
            rows.append({"label": int(label), "source_index": i, **row})
    return datasets.Dataset.from_list(rows, features=covar_features(class_names))


def inpaint_backgrounds(
    image: np.ndarray,
    mask: np.ndarray,
    prompts: Sequence[str],
    model: str | os.PathLike[str] | Any,
    seed: int = 0,
    *,
    keep_object: bool = False,
    load_kwargs: Mapping[str, Any] | None = None,
    **call_kwargs: Any,
) -> list[np.ndarray]:
    """Generative backgrounds, one per prompt, from a diffusers inpainting pipeline.

    * ``keep_object=False`` (default): the whole frame is repainted, so the output is an
      object-free scene that :func:`build_covar` can put the object on under every
      transform (``image`` only sets the size and the pipeline's starting point).
    * ``keep_object=True``: only the pixels outside ``mask`` are repainted, so the scene
      is drawn around the object, which stays at its place with its exact pixels. Such
      an output is a finished variant; as a ``build_covar`` background it shows the
      object a second time in rows whose transform moves the object.

    Args:
        image: ``(H, W, 3) uint8``.
        mask: ``(H, W) bool``, true on the object; with ``keep_object`` those pixels of
            ``image`` are copied into every output unchanged (the VAE would alter them).
        prompts: one background description per output.
        model: a diffusers inpainting checkpoint name or folder, loaded with
            ``AutoPipelineForInpainting.from_pretrained(model, **load_kwargs)``, or an
            already built pipeline (reuse one over many objects).
        seed: output ``i`` uses ``torch.Generator().manual_seed(seed + i)``.
        load_kwargs: ``from_pretrained`` keyword arguments (``torch_dtype``, ``variant``,
            ``local_files_only``, ...); only with a name or folder.
        **call_kwargs: passed to every pipeline call (``num_inference_steps``, ``height``,
            ``width``, ``guidance_scale``, ``strength``, ``negative_prompt``, ...); a name
            the pipeline's ``__call__`` does not list raises ``TypeError``.

    Returns:
        ``len(prompts)`` arrays ``(H, W, 3) uint8``: the generated image (resized back to
        ``H x W`` when ``height``/``width`` differ), with ``image`` where ``mask`` is set
        if ``keep_object``; usable as ``build_covar(backgrounds=...)``.
    """
    import torch
    from PIL import Image

    m = mask.astype(bool)
    if image.shape[:2] != m.shape:
        raise ValueError(f"mask: shape {m.shape} differs from image {image.shape[:2]}")
    if isinstance(model, (str, os.PathLike)):
        from diffusers import AutoPipelineForInpainting

        pipe = AutoPipelineForInpainting.from_pretrained(model, **(load_kwargs or {}))
    elif load_kwargs:
        raise ValueError("load_kwargs: only with a model name or folder, not a built pipeline")
    else:
        pipe = model
    # diffusers pipelines take **kwargs and ignore unknown names: reject them (typos, load arguments)
    params = inspect.signature(pipe).parameters.values()
    named = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if named and set(call_kwargs) - named:
        raise TypeError(f"call_kwargs: the pipeline takes no {sorted(set(call_kwargs) - named)}")
    init = Image.fromarray(image)
    keep = m if keep_object else np.zeros_like(m)
    repaint = Image.fromarray((~keep).astype(np.uint8) * 255)  # white = repaint
    out = []
    for i, prompt in enumerate(prompts):
        gen = torch.Generator().manual_seed(seed + i)
        res = pipe(prompt=prompt, image=init, mask_image=repaint, generator=gen, **call_kwargs).images[0]
        out.append(np.where(keep[..., None], image, np.asarray(res.convert("RGB").resize(init.size))).astype(np.uint8))
    return out


@dataclass
class CovarEvaluation:
    """Per-row results of :func:`evaluate_covar`.

    Attributes:
        preds, labels: ``(R,)`` predicted / true classes.
        categories: per-row diagnosis (``correct``, ``BG-Er``, ``Fine-Er``, ``FG-Er``).
        transforms: per-row transform names.
        fg_share: ``(R,)`` share of positive CCI importance inside the mask.
        shares: :func:`~.diagnosis.error_shares` per transform (and ``"all"``).
    """

    preds: torch.Tensor
    labels: torch.Tensor
    categories: list[str]
    transforms: list[str]
    fg_share: torch.Tensor
    shares: dict[str, dict[str, float]] = field(default_factory=dict)


def evaluate_covar(
    cci: Any,
    dataset: datasets.Dataset,
    class_text_embeds: torch.Tensor,
    judge: Any = None,
    threshold: float = 0.5,
    batch_size: int = 16,
    pixels: Any = None,
) -> CovarEvaluation:
    """Zero-shot classify COVAR, explain the predicted class with CCI, diagnose errors.

    Args:
        cci: a :class:`~.importance.ConceptClusterImportance`.
        dataset: from :func:`build_covar`.
        class_text_embeds: ``(C, E)`` class prompt embeddings.
        judge: Fine-Er judge (see :mod:`.diagnosis`).
        threshold: map binarisation threshold.
        batch_size: rows per step.
        pixels: list of PIL images -> model inputs; default
            :func:`~concept_grounding.models.clip.preprocess.to_pixel_values` (CLIP normalisation at the
            model's input size).
    """
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from ..models.clip.preprocess import to_pixel_values
    from .diagnosis import diagnose, error_shares, foreground_share

    t = F.normalize(class_text_embeds.float(), dim=-1)
    preds, labels, cats, names, shares = [], [], [], [], []
    for start in tqdm(range(0, len(dataset), batch_size), desc="COVAR eval", leave=False):
        rows = dataset[start : start + batch_size]
        px = pixels(rows["image"]) if pixels is not None else to_pixel_values(rows["image"], cci.backend.image_size)
        emb = cci.embed(px)
        pred = (F.normalize(emb.image_embeds.float(), dim=-1) @ t.T).argmax(-1)
        out = cci.explain_embeddings(emb, t[pred])
        h, w = out.maps.shape[1:]
        fg = torch.from_numpy(np.stack([np.asarray(m.resize((w, h), 0)) > 127 for m in rows["mask"]]))
        lab = torch.tensor(rows["label"])
        cats += diagnose(out.maps, fg, pred, lab, judge, threshold)
        shares.append(foreground_share(out.maps, fg))
        preds.append(pred)
        labels.append(lab)
        names += list(rows["transform"])
    return CovarEvaluation(
        preds=torch.cat(preds),
        labels=torch.cat(labels),
        categories=cats,
        transforms=names,
        fg_share=torch.cat(shares),
        shares=error_shares(cats, names),
    )
