"""The settings of the world TDG experiment (:mod:`.world_tdg`): :class:`WorldTDGSettings`, its
:data:`STAGES` and :func:`check_settings`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from concept_grounding.worldflux.loader import WORLD_STEPS, WORLD_TRUE_CFG

__all__ = ["STAGES", "WorldTDGSettings", "check_settings"]

#: The stages, in the order they run.
STAGES = ("validate", "quality", "substitution", "sweep", "filter", "timing")


@dataclass
class WorldTDGSettings:
    """Every setting of one run (``benchmarks/bench_tdg_world.py``'s flags, same names; the
    results record them in this order).

    Attributes:
        out: report folder (judges are cached here).
        pipeline: world Flux folder (``None``: the shipped one).
        stages: stages to run (:data:`STAGES`).
        images: images per SUB pairing and method.
        quality_images: images per species for the quality prompts.
        steps, cfg: sampling steps and true CFG scale (both methods; default: the world Flux's own).
        sweep_pairings, sweep_etas: pairings in the eta sweep and its constant eta values.
        judge_per_class, judge_epochs: the judge's training renders per species and kind, and epochs.
        validation_edits, validation_renders: held-out exact edits per pairing, renders per species.
        clip_train: renders per species to train the filter's world CLIP.
        bootstrap: bootstrap resamples of every interval.
        batch: images per pipeline call (TDG: ``batch // 2`` pairs).
        threads: torch threads.
        seed: base seed.
        limit_pairings: only the first N pairings (debugging).
        export_judge: also write the validated judge and its model card here.
        device: torch device of the pipeline (initial noise is drawn on the CPU either way;
            judges run on the CPU).
    """

    out: Path
    pipeline: Path | None = None
    stages: Sequence[str] = STAGES
    images: int = 1
    quality_images: int = 4
    steps: int = WORLD_STEPS
    cfg: float = WORLD_TRUE_CFG
    sweep_pairings: int = 96
    sweep_etas: Sequence[float] = field(default_factory=lambda: [0.0, 0.5, 0.8, 0.95, 1.0])
    judge_per_class: int = 150
    judge_epochs: int = 32
    validation_edits: int = 3
    validation_renders: int = 10
    clip_train: int = 80
    bootstrap: int = 1000
    batch: int = 64
    threads: int = 1
    seed: int = 0
    limit_pairings: int | None = None
    export_judge: Path | None = None
    device: str = "cpu"

    def as_dict(self) -> dict[str, Any]:
        """The settings as JSON values (paths as strings), in field order (``results["settings"]``)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {
            k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v) for k, v in values.items()
        }


def check_settings(settings: WorldTDGSettings) -> None:
    """Fail in one line, before anything loads, on a setting out of range.

    Raises:
        UsageError: a count is not positive, a stage is unknown, or ``pipeline`` is no pipeline folder.
    """
    from concept_grounding.errors import UsageError

    for name in (
        "images",
        "quality_images",
        "steps",
        "judge_per_class",
        "judge_epochs",
        "validation_edits",
        "validation_renders",
        "clip_train",
        "batch",
        "threads",
    ):
        if getattr(settings, name) <= 0:
            raise UsageError(f"must be > 0, got {getattr(settings, name)}", argument=f"--{name.replace('_', '-')}")
    unknown = sorted(set(settings.stages) - set(STAGES))
    if unknown:
        raise UsageError(f"unknown stage(s) {unknown}", argument="--stages", hint=f"choose from {', '.join(STAGES)}")
    if settings.pipeline is not None and not (Path(settings.pipeline) / "model_index.json").is_file():
        raise UsageError(f"{settings.pipeline} has no model_index.json", argument="--pipeline")
