"""What every trained image judge is: probabilities per head for a batch of images, and a
validation on the bird world's exact truth (docs/judges.md).

>>> report = JudgeReport("toy", {"species": 0.97, "attributes": 0.91}, bar=0.95)
>>> report.passed, str(report)
(False, 'toy judge: species 97.0 %, attributes 91.0 % (bar 95 %): FAILS')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch

    from ..world import BirdWorld

__all__ = ["JudgeReport", "ImageJudge", "as_image_array", "to_unit", "from_pretrained_quietly"]


@dataclass(frozen=True)
class JudgeReport:
    """A judge's validation on exact world truth: accuracy per head (or per measure of a head),
    the bar every one must reach, and whether all do; printed beside the judge's verdicts.

    Attributes:
        judge: the registered name of the judge.
        accuracy: head -> held-out accuracy in [0, 1].
        bar: the accuracy every head must reach before its verdicts are used.
        images: how many held-out images it was measured on.
    """

    judge: str
    accuracy: Mapping[str, float]
    bar: float
    images: int = 0
    details: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        """Every head at or above the bar."""
        return all(v >= self.bar for v in self.accuracy.values())

    @property
    def failing(self) -> tuple[str, ...]:
        """The heads below the bar."""
        return tuple(k for k, v in self.accuracy.items() if not v >= self.bar)

    def __str__(self) -> str:
        heads = ", ".join(f"{k} {100 * v:.1f} %" for k, v in self.accuracy.items())
        name = self.judge.removesuffix("-judge")
        return f"{name} judge: {heads} (bar {100 * self.bar:.0f} %): {'passed' if self.passed else 'FAILS'}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "accuracy": dict(self.accuracy),
            "bar": self.bar,
            "images": self.images,
            "passed": self.passed,
        }


@runtime_checkable
class ImageJudge(Protocol):
    """A trained image judge (species, attributes, styles, compositions, the world judge).

    ``head_sizes`` declares each head's ``K``; ``probabilities(images)`` maps uint8
    ``(N, H, W, 3)`` images (or a sequence of PIL images) to head -> float ``(N, K)`` in
    [0, 1] (a softmax over the head's values, or independent attribute probabilities);
    ``validate(world)`` measures it on held-out exact truth of the bird world.
    """

    name: str
    bar: float

    @property
    def head_sizes(self) -> dict[str, int]: ...

    def probabilities(self, images: np.ndarray | Sequence) -> dict[str, np.ndarray]: ...

    def validate(self, world: BirdWorld | None = None, per_class: int = 2) -> JudgeReport: ...


def as_image_array(images: np.ndarray | Sequence, size: int | None = None) -> np.ndarray:
    """uint8 ``(N, H, W, 3)`` of an array (as is) or a sequence of arrays or PIL images (stacked);
    PIL images of another side than ``size`` are resized to ``(size, size)`` (PIL's default filter)."""
    if isinstance(images, np.ndarray):
        arr = images
    elif len(images) == 0:
        return np.zeros((0, size or 0, size or 0, 3), np.uint8)
    else:
        arr = np.stack([_pil_array(im, size) if hasattr(im, "convert") else np.asarray(im) for im in images])
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(f"images must be (N, H, W, 3), got {arr.shape}")
    return arr


def _pil_array(image: Any, size: int | None) -> np.ndarray:
    image = image.convert("RGB")
    if size is not None and image.size != (size, size):
        image = image.resize((size, size))
    return np.asarray(image)


def from_pretrained_quietly(cls: Any, folder: Any) -> Any:
    """``cls.from_pretrained(folder)`` in eval mode, without huggingface_hub's "Loading weights" print."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return cls.from_pretrained(folder).eval()


def to_unit(images: np.ndarray) -> torch.Tensor:
    """uint8 ``(N, H, W, 3)`` -> float ``(N, 3, H, W)`` in [0, 1]."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float().div_(255.0)
