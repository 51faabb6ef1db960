"""The judges of the world TDG experiment (:mod:`.world_tdg`): the grounded world judge and the
world CLIP of the VQA filter, trained once and cached under ``settings.out``, and the judge's export."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from .world_tdg_settings import WorldTDGSettings

__all__ = [
    "judge_folder",
    "cached_judge",
    "cached_clip",
    "to_unit",
    "judge_cost",
    "export_judge",
    "make_judge_fn",
    "WorldClipScorer",
]


def judge_folder(world: Any, settings: WorldTDGSettings) -> Path:
    """Where the judge of ``world`` and these judge settings is cached under ``--out``."""
    c = world.config
    return (
        settings.out
        / (
            f"judges-s{c.image_size}-{c.pose}-{c.scene}-z{c.zoom:g}-n{settings.judge_per_class}"
            f"-e{settings.judge_epochs}-seed{settings.seed}"
        )
        / "judge"
    )


def cached_judge(world: Any, settings: WorldTDGSettings) -> Any:
    """The grounded :class:`WorldJudge` of ``world``, cached as a ``save_pretrained`` folder.
    (Trained on raw renders: variants trained with half their images through the world VAE
    or blurred were measured and read raw images worse without reading decoded ones better.)"""
    from concept_grounding.judge import create_judge, judge_training_set, train_judge

    folder = judge_folder(world, settings)
    if (folder / "config.json").is_file():
        return create_judge("world-judge", path=folder)
    t0 = time.perf_counter()
    data = judge_training_set(world, settings.judge_per_class, seed=settings.seed)
    t1 = time.perf_counter()
    judge = train_judge(data, world.class_names, epochs=settings.judge_epochs, seed=settings.seed)
    judge.save_pretrained(folder)
    cost = {"render_seconds": t1 - t0, "train_seconds": time.perf_counter() - t1, "threads": settings.threads}
    (folder / "training_time.json").write_text(json.dumps(cost))
    return judge


def cached_clip(world: Any, settings: WorldTDGSettings) -> Any:
    """The world CLIP (the VQA filter's scorer here: no VLM can be downloaded), cached."""
    import datasets

    from concept_grounding.models.clip import WorldCLIP, train_world_clip
    from concept_grounding.schema import cub_features
    from concept_grounding.world.dataset import sample_row

    c = world.config
    folder = (
        settings.out
        / f"judges-s{c.image_size}-{c.pose}-{c.scene}-z{c.zoom:g}-clip{settings.clip_train}-seed{settings.seed}"
        / "clip"
    )
    if (folder / "config.json").is_file():
        return WorldCLIP.from_pretrained(folder).eval()
    idx = [k + r * world.num_classes for r in range(1000, 1000 + settings.clip_train) for k in range(world.num_classes)]
    rows = [sample_row(world, s, True) for s in world.samples(idx)]
    features = cub_features(world.class_names, world.vocab)
    ds = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)
    clip, _ = train_world_clip(ds, image_size=c.image_size, epochs=12, seed=settings.seed)
    clip.save_pretrained(folder)
    return clip


def to_unit(images: Any) -> Any:
    """uint8 (N,H,W,3) array or list of PIL images -> float (N,3,H,W) in [0, 1]."""
    from concept_grounding.judge.base import as_image_array
    from concept_grounding.judge.base import to_unit as unit

    return unit(as_image_array(images))


def judge_cost(world: Any, settings: WorldTDGSettings) -> str:
    """The measured rendering and training time of the cached judge, as a phrase ("" if unknown)."""
    path = judge_folder(world, settings) / "training_time.json"
    if not path.is_file():
        return ""
    t = json.loads(path.read_text())
    return (
        f"; measured {t['render_seconds'] / 60:.0f} min rendering + {t['train_seconds'] / 60:.0f} min training with "
        f"{t['threads']} thread(s)"
    )


def export_judge(judge: Any, validation: Any, results: dict, folder: Path, cost: str = "") -> None:
    """The judge as a ``save_pretrained`` folder with a model card (the command, its measured
    cost ``cost`` from :func:`judge_cost`, its validation) and ``validation.json``, which
    :func:`~concept_grounding.judge.judge_validated_groups` reads."""
    judge.save_pretrained(folder)
    (folder / "validation.json").write_text(json.dumps(validation.to_dict(), indent=1) + "\n")
    (folder / "README.md").write_text(
        "\n".join(
            [
                "---",
                "library_name: concept-grounding",
                "tags: [world-judge, bird-world]",
                "---",
                "",
                "# World judge: species and attributes of the shipped world Flux's birds",
                "",
                "A `concept_grounding.judge.WorldJudge` (a small CNN: species head and one softmax per base attribute",
                "group) trained on typical renders, their exact counterfactual edits and deviation-rate-1 renders of",
                f'the world `{results["world"]}`. Load it with `concept_grounding.judge.create_judge("world-judge")`.',
                "",
                f"Made by (deterministic for a given --threads: float sums differ across thread counts{cost}):",
                "",
                f"    {results['command']}",
                "",
                "## Validation on held-out exact edits and renders (raw, and after the world VAE's round trip)",
                "",
                "Also in `validation.json`; `concept_grounding.judge.judge_validated_groups()` reads the groups "
                "that meet",
                "every bar (verdicts on the other groups are not findings).",
                "",
                validation.to_markdown(),
                "",
            ]
        )
    )


def make_judge_fn(judge: Any) -> Any:
    """``images -> (species (N,), attribute probabilities (N, 312))`` of ``judge``."""
    from concept_grounding.judge import judge_images

    return lambda images: judge_images(judge, images)


class WorldClipScorer:
    """The filter's ``OptionScorer`` over the world CLIP: softmax of 100 x the cosine
    similarities with the group's value prompts and "a photo of a bird" for "Other"."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer

    def score(self, images: Any, question: str, options: Any, group: str) -> np.ndarray:
        import torch

        from concept_grounding.models.clip import clip_group_scores

        sims = clip_group_scores(self.model, self.tokenizer, to_unit(images), group, include_none=True)
        if sims.shape[1] != len(options):
            raise ValueError(f"options: expected {sims.shape[1]}, got {len(options)}")
        return torch.softmax(100.0 * sims, dim=1).numpy()
