"""The ``covar`` job's settings (:class:`CovarConfig`); docs/covar.md.

>>> CovarConfig(objects=1, backgrounds=2).num_backgrounds
2
>>> CovarConfig(judge="magic")
Traceback (most recent call last):
...
ValueError: judge must be one of ('attributes', 'text'), got 'magic'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..settings import setting
from ..validators import (
    closed_unit_interval,
    existing_dir,
    existing_file,
    float_range,
    multiple_of,
    positive_int,
    world_clip_side,
)

__all__ = ["CovarConfig", "INPAINT_PROMPTS"]

#: Default scenes for ``inpaint_model``.
INPAINT_PROMPTS = (
    "a photo of a forest",
    "a photo of a sandy beach",
    "a photo of a snowy field",
    "a photo of a city street",
    "a photo of a lake shore",
)
JUDGES = ("attributes", "text")


@dataclass(frozen=True)
class CovarConfig:
    """What to build and evaluate.

    Args:
        objects: world birds to vary.
        backgrounds: procedural backgrounds per bird (ignored with ``inpaint_model``).
        size: world image side in pixels (a multiple of 8, >= 32).
        model: a resolved CLIP name or folder, ``"random-clip[:seed]"`` (random weights, on purpose);
            ``None`` or ``"world-clip"``: the shipped world CLIP (:mod:`concept_grounding.cci.loading`).
        pretrained: the weights tag of an open_clip ``model`` (refused without one; ``"random"`` asks for
            random weights).
        clusters: K of the k-means.
        judge: Fine-Er judge, ``"attributes"`` (world class attribute vectors) or ``"text"``.
        judge_threshold: cosine in [-1, 1] above which two classes are similar (``None``: the
            90th percentile of class pairs).
        threshold: map binarisation, fraction of the maximum, in [0, 1].
        steps: Deletion/Insertion steps.
        seed: world, background and k-means seed.
        inpaint_model: a resolved diffusers inpainting checkpoint: generate the backgrounds
            from ``inpaint_prompts`` instead of the procedural ones.
        inpaint_prompts, inpaint_size, inpaint_steps: one generated background per prompt, its
            side in pixels (a multiple of 8) and denoising steps.
        images: an image folder (:func:`~concept_grounding.cci.layouts.read_image_folder`: one
            sub-folder per class) whose foreground masks lie in ``images/masks/<class>/<stem>.png``
            (255 = object); its first ``objects`` images (resized to ``size``) replace the world
            birds. Only the ``"text"`` judge applies (no class attribute vectors), and the
            pointing game is left out (no part locations). ``class_names_file``: its class names.
        detector, segmenter, detector_threshold, mask_cache: a grounded segmenter
            (:class:`~concept_grounding.cci.segment.GroundedSegmenter`, models by name) computing
            the masks the folder lacks (or, where it has them, measuring its agreement with them),
            each cached under ``mask_cache`` (the command's default: ``OUT/mask_cache``).
        save_dataset: :meth:`~.covar_job.CovarResult.save` also writes the dataset (``datasets``' ``save_to_disk``)
            to ``out/dataset``.
    """

    objects: int = setting(4, "world birds to vary", parse=positive_int)
    backgrounds: int = setting(20, "backgrounds per bird", parse=positive_int)
    size: int = setting(64, "world image side in pixels (a multiple of 8, >= 32)", parse=world_clip_side)
    model: str | None = setting(
        None,
        "world-clip (the shipped world CLIP, the default), random-clip[:seed] (random "
        "weights, on purpose), a WorldCLIP folder, an open_clip name or a transformers "
        "id/path",
    )
    clusters: int = setting(7, "K of the k-means over patch tokens", parse=positive_int)
    judge: str = setting(
        "attributes", "Fine-Er judge (default: attributes on the world, text with --images)", choices=JUDGES
    )
    judge_threshold: float | None = setting(
        None,
        "cosine above which two classes are similar (default: the 90th percentile of class pairs)",
        parse=float_range(-1.0, 1.0),
    )
    threshold: float = setting(0.5, "map binarisation, fraction of the maximum, in [0, 1]", parse=closed_unit_interval)
    steps: int = setting(10, "Deletion/Insertion steps", parse=positive_int)
    seed: int = setting(0, "seed of the world, the backgrounds and the k-means", parse=int)
    inpaint_model: str | None = setting(
        None,
        "diffusers inpainting checkpoint (Hub id or folder): generate object-free "
        "backgrounds from --inpaint-prompts instead of the procedural ones "
        "(--backgrounds is then ignored; default: procedural backgrounds)",
    )
    inpaint_prompts: Sequence[str] = setting(
        INPAINT_PROMPTS,
        "one generated background per prompt (--inpaint-model)",
        nargs="+",
        metavar="PROMPT",
        convert=tuple,
    )
    inpaint_size: int = setting(
        512, "generation side in pixels (--inpaint-model)", parse=multiple_of(8, why="the VAE downsamples by 8")
    )
    inpaint_steps: int = setting(30, "denoising steps (--inpaint-model)", parse=positive_int)
    pretrained: str | None = setting(
        None,
        "open_clip weights tag for an architecture --model (e.g. openai), a weights "
        "file, or 'random' for random weights on purpose (an architecture without it "
        "is refused)",
    )
    images: str | None = setting(
        None,
        "an image folder (one sub-folder per class, masks in masks/<class>/<stem>.png) "
        "whose images replace the world birds (default: the world)",
        parse=existing_dir,
        convert=str,
    )
    class_names_file: str | None = setting(
        None,
        "class names of --images: one per line in sorted-folder order, or '<folder> <name>' lines",
        parse=existing_file,
        flag="--class-names",
        convert=str,
    )
    detector: str | None = setting(
        None,
        "zero-shot object detector (OWL-ViT, OWLv2, Grounding DINO; Hub id or folder) "
        "that, with --segmenter, computes the masks --images lacks",
    )
    segmenter: str | None = setting(None, "SAM checkpoint (Hub id or folder) segmenting the detected box")
    detector_threshold: float = setting(0.1, "the detector's box score threshold", parse=closed_unit_interval)
    mask_cache: str | None = setting(
        None, "folder caching computed masks, one PNG per image (default: OUT/mask_cache)", parse=Path, convert=str
    )
    save_dataset: bool = setting(False, "save the COVAR dataset with save_to_disk", action="store_true")

    def __post_init__(self) -> None:
        for name in ("objects", "backgrounds", "clusters", "steps", "inpaint_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)}")
        if self.size < 32 or self.size % 8:
            raise ValueError(f"size must be a multiple of 8 that is >= 32, got {self.size}")
        if self.inpaint_size < 8 or self.inpaint_size % 8:
            raise ValueError(f"inpaint_size must be a multiple of 8, got {self.inpaint_size}")
        if self.judge not in JUDGES:
            raise ValueError(f"judge must be one of {JUDGES}, got {self.judge!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.judge_threshold is not None and not -1.0 <= self.judge_threshold <= 1.0:
            raise ValueError(f"judge_threshold must be in [-1, 1], got {self.judge_threshold}")
        if self.inpaint_model is not None and not self.inpaint_prompts:
            raise ValueError("inpaint_prompts: give at least one prompt with inpaint_model")
        if (self.detector is None) != (self.segmenter is None):
            raise ValueError("detector and segmenter: give both (a grounded segmenter) or neither")
        if self.detector is not None and self.images is None:
            raise ValueError("detector: the world has exact masks; a segmenter applies to images")
        if self.images is not None and self.judge == "attributes":
            raise ValueError(
                "judge 'attributes' needs the world's class attribute vectors; use judge='text' with images"
            )

    @property
    def num_backgrounds(self) -> int:
        """Backgrounds per bird: one per prompt when generating, else ``backgrounds``."""
        return len(self.inpaint_prompts) if self.inpaint_model is not None else self.backgrounds
