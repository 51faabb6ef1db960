"""Foreground masks from a grounded segmenter, for COVAR and the error diagnosis on real images.

The CCI paper takes its foreground / background masks from GroundedSAM. Here the same two
stages run through transformers, each model loaded by name (a Hub id or a local folder):

1. an open-vocabulary detector (``AutoModelForZeroShotObjectDetection``: OWL-ViT, OWLv2,
   Grounding DINO) finds the box of the prompt's object; the highest-scoring box above
   ``threshold`` is kept;
2. SAM (``SamModel``) segments inside that box; of its mask candidates the one with the highest
   predicted IoU is kept (``mask_threshold`` on the upsampled logits, SAM's 0).

:class:`GroundedSegmenter` returns ``(H, W)`` bool masks at the image's size and caches each
one as a PNG keyed by the image bytes, the prompt and the settings, so an image is segmented
once however many models or runs use it. An image in which the detector finds nothing is a
:class:`~concept_grounding.errors.UsageError` naming ``--detector`` and the image.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError

__all__ = ["GroundedSegmenter"]


@dataclass
class GroundedSegmenter:
    """Detector + SAM (module docstring).

    Args:
        detector, detector_processor: a transformers zero-shot object detector and its processor.
        sam, sam_processor: a ``SamModel`` and its ``SamProcessor``.
        threshold: the detector's box score threshold.
        cache_dir: where masks are cached (``None``: no cache).
        name: the two model names, part of the cache key.
    """

    detector: Any
    detector_processor: Any
    sam: Any
    sam_processor: Any
    threshold: float = 0.1
    cache_dir: Path | None = None
    name: str = ""

    @classmethod
    def from_pretrained(
        cls,
        detector: str,
        segmenter: str,
        *,
        threshold: float = 0.1,
        cache_dir: str | Path | None = None,
        device: str = "cpu",
    ) -> GroundedSegmenter:
        """Load both models by name (checked offline first: a name that cannot load is one line
        naming ``--detector`` / ``--segmenter``)."""
        from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor, SamModel, SamProcessor

        from ..hub import resolve_model_spec

        det_path = resolve_model_spec(detector, "--detector", family="hub").target  # both first: a bad one fails
        sam_path = resolve_model_spec(segmenter, "--segmenter", family="hub").target  # before any load
        det, det_proc = _load_pair(
            AutoModelForZeroShotObjectDetection,
            AutoProcessor,
            det_path,
            detector,
            "--detector",
            "a zero-shot object detector",
            device,
        )
        sam, sam_proc = _load_pair(
            SamModel, SamProcessor, sam_path, segmenter, "--segmenter", "a SAM checkpoint", device
        )
        return cls(
            det,
            det_proc,
            sam,
            sam_proc,
            threshold,
            None if cache_dir is None else Path(cache_dir),
            f"{detector}|{segmenter}",
        )

    # 1. detect
    def box(self, image, prompt: str) -> list[float] | None:
        """The best ``[x0, y0, x1, y1]`` box (pixels) of ``prompt`` in the PIL ``image``, or None."""
        import torch

        inputs = self.detector_processor(text=[[prompt]], images=image, return_tensors="pt").to(self.detector.device)
        with torch.no_grad():
            out = self.detector(**inputs)
        post = (
            getattr(self.detector_processor, "post_process_grounded_object_detection", None)
            or self.detector_processor.post_process_object_detection
        )
        target = torch.tensor([image.size[::-1]])
        try:
            found = post(out, threshold=self.threshold, target_sizes=target)[0]
        except TypeError:  # Grounding DINO names it box_threshold
            found = post(out, inputs.input_ids, box_threshold=self.threshold, target_sizes=target)[0]
        if len(found["scores"]) == 0:
            return None
        return found["boxes"][int(found["scores"].argmax())].tolist()

    # 2. segment
    def segment(self, image, box: list[float]) -> np.ndarray:
        """SAM's best mask ``(H, W)`` bool inside ``box``."""
        import torch

        inputs = self.sam_processor(images=image, input_boxes=[[box]], return_tensors="pt").to(self.sam.device)
        with torch.no_grad():
            out = self.sam(pixel_values=inputs["pixel_values"], input_boxes=inputs["input_boxes"])
        masks = self.sam_processor.image_processor.post_process_masks(
            out.pred_masks.cpu(), inputs["original_sizes"].cpu(), inputs["reshaped_input_sizes"].cpu()
        )[0]  # (1, C, H, W)
        return masks[0, int(out.iou_scores[0, 0].argmax())].numpy().astype(bool)

    def _key(self, image, prompt: str) -> str:
        digest = hashlib.sha1(np.asarray(image.convert("RGB")).tobytes())
        digest.update(json.dumps([image.size, prompt, self.name, self.threshold]).encode())
        return digest.hexdigest()

    def __call__(self, image, prompt: str, *, source: str | Path | None = None) -> np.ndarray:
        """The foreground mask ``(H, W)`` bool of ``prompt``'s object in ``image`` (PIL or
        ``(H, W, 3)`` uint8), from the cache when it holds it. ``source`` names the image in errors."""
        from PIL import Image

        image = image if hasattr(image, "convert") else Image.fromarray(np.asarray(image))
        path = None if self.cache_dir is None else self.cache_dir / f"{self._key(image, prompt)}.png"
        if path is not None and path.is_file():
            return np.asarray(Image.open(path)) > 127
        box = self.box(image, prompt)
        if box is None:
            raise UsageError(
                f"the detector finds no {prompt!r} above threshold {self.threshold:g}",
                argument="--detector",
                file=None if source is None else str(source),
            )
        mask = self.segment(image, box)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(mask.astype(np.uint8) * 255).save(path)
        return mask


def _load_pair(
    model_cls: Any, processor_cls: Any, path: str, name: str, argument: str, what: str, device: str
) -> tuple[Any, Any]:
    """``(model, processor)`` of the resolved checkpoint ``path`` (the user's ``name``), the model
    in eval mode on ``device``; a checkpoint that is not ``what`` is one line naming ``argument``."""
    try:
        return model_cls.from_pretrained(path).to(device).eval(), processor_cls.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise UsageError(f"{name!r} is not {what}: {str(err).splitlines()[0]}", argument=argument) from None
