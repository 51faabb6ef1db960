"""Pieces several tabs share: the world, figures as images, heat-map overlays."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np

from .resources import ResourceStore

__all__ = ["build_world", "get_world", "figure_to_image", "class_label", "attribute_label", "Cancelled", "stopper"]


class Cancelled(Exception):
    """The visitor left: a tab's work stopped at its next check (:func:`stopper`)."""


def stopper(cancelled: Callable[[], bool] | None) -> Callable[[str], None]:
    """A check a tab's work calls before each stage or batch: it raises :class:`Cancelled`
    (``"stopped before <stage>"``) once ``cancelled()`` answers true. The Space passes a
    ``cancelled`` that turns true when the visitor leaves (:func:`~.guard.run_while_wanted`).

    >>> stop = stopper(lambda: True)
    >>> stop("the model")
    Traceback (most recent call last):
    ...
    concept_grounding.space.common.Cancelled: stopped before the model
    >>> stopper(None)("anything") is None
    True
    """

    def stop(stage: str) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled(f"stopped before {stage}")

    return stop


def build_world(store: ResourceStore) -> tuple[Any, str]:
    """The bird world of the Space: ``BirdWorld(WorldConfig(image_size, seed))``."""
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=store.image_size, seed=store.seed))
    return world, f"bird world, {store.image_size} px, seed {store.seed}"


def get_world(store: ResourceStore) -> Any:
    return store.get("world", build_world)


def figure_to_image(fig: Any, dpi: int = 96) -> np.ndarray:
    """Render a Matplotlib figure to an ``(H, W, 3)`` uint8 array.

    Figures should be ``matplotlib.figure.Figure`` objects, not pyplot ones: pyplot's
    global figure registry is not safe from the Space's concurrent request threads.
    """
    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    buffer.seek(0)
    return np.asarray(Image.open(buffer).convert("RGB"))


def png_to_image(png: Any) -> np.ndarray:
    """A PNG given as bytes, a path or a PIL image -> ``(H, W, 3)`` uint8."""
    from PIL import Image

    if isinstance(png, Image.Image):
        return np.asarray(png.convert("RGB"))
    if isinstance(png, (bytes, bytearray)):
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    if isinstance(png, np.ndarray):
        return png
    return np.asarray(Image.open(png).convert("RGB"))


def class_label(folder: str) -> str:
    """``"017.Cardinal"`` -> ``"Cardinal"`` (the name shown in dropdowns)."""
    from ..vocabulary import class_display_name

    return class_display_name(folder)


def attribute_label(name: str) -> str:
    """``"has_crown_color::black"`` -> ``"black crown color"``."""
    from ..vocabulary import attribute_phrase

    return attribute_phrase(name)


def overlay_heatmap(image: np.ndarray, heat: Any, alpha: float = 0.5, cmap: str = "jet") -> np.ndarray:
    """:func:`concept_grounding.models.coam.overlay_heatmap` as an ``(H, W, 3)`` uint8 array."""
    from ..models.coam import overlay_heatmap as coam_overlay

    heat = heat.detach().cpu().numpy() if hasattr(heat, "detach") else np.asarray(heat)
    return np.asarray(coam_overlay(image, heat.astype(np.float32), alpha=alpha, cmap=cmap))


def label_overlay(image: np.ndarray, labels: np.ndarray, alpha: float = 0.55) -> np.ndarray:
    """Colour an integer ``(h, w)`` label grid (nearest-upsampled) over the image. Display only."""
    import matplotlib

    grid = _resize_map(np.asarray(labels, dtype=np.float64), image.shape[:2], nearest=True).astype(int)
    colours = np.asarray(matplotlib.colormaps["tab10"].colors)[grid % 10] * 255.0
    return np.clip((1 - alpha) * image + alpha * colours, 0, 255).astype(np.uint8)


def _resize_map(values: np.ndarray, size: tuple[int, int], nearest: bool) -> np.ndarray:
    from PIL import Image

    if values.shape == tuple(size):
        return values
    resample = Image.Resampling.NEAREST if nearest else Image.Resampling.BILINEAR
    pil = Image.fromarray(values.astype(np.float32), mode="F").resize((size[1], size[0]), resample)
    return np.asarray(pil, dtype=np.float64)


def to_batch(images: list[np.ndarray], size: int) -> Any:
    """``(N, 3, size, size)`` model input in [0, 1] from ``(H, W, 3)`` uint8 images."""
    from ..models.data import images_to_tensor

    return images_to_tensor(images, size)


def world_concept_tensors(world: Any, per_class: int, columns: list[int], size: int) -> Any:
    """A :class:`~concept_grounding.models.data.ConceptTensors` of the world's first
    ``per_class`` birds of every class, with exact labels for the attribute ``columns``."""
    import torch

    from ..models.data import ConceptTensors
    from ..vocabulary import load_vocabulary

    samples = [world.sample(i) for i in range(per_class * world.num_classes)]
    vocab = load_vocabulary()
    return ConceptTensors(
        images=to_batch([s.image for s in samples], size),
        concepts=torch.from_numpy(np.stack([s.attributes[columns] for s in samples]).astype(np.float32)),
        labels=torch.as_tensor([s.label for s in samples], dtype=torch.long),
        concept_indices=tuple(columns),
        concept_names=tuple(vocab.attributes[i] for i in columns),
        class_names=tuple(world.class_names),
    )
