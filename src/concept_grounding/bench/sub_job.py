"""The ``sub`` job: SUB accuracy of one or several models, and its report folder.

:func:`run_sub` scores every model of a :class:`SubConfig` with
:func:`~concept_grounding.evaluation.evaluate_sub` (the library entry point); the
:class:`SubResult` writes one report folder per model (:meth:`SubEvaluation.save
<concept_grounding.evaluation.sub.SubEvaluation.save>`) and, for several models, a summary
table linking them. The command ``concept-grounding sub`` resolves each ``--model`` first
(:func:`concept_grounding.hub.resolve_model_spec`), then runs this job.

>>> SubConfig(models=(ScoredModel("ViT-B-32", "openai"),)).folders()
['.']
>>> SubConfig(models=(ScoredModel("a/cbm"), ScoredModel("ViT-B-32", "openai"))).folders()
['cbm', 'vit-b-32-openai']
>>> rgb_triple("0.5,0.5,0.5")
(0.5, 0.5, 0.5)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..settings import setting, tuple_or_none
from ..validators import int_at_least

if TYPE_CHECKING:
    from ..evaluation.sub import SubEvaluation

__all__ = ["SubConfig", "ScoredModel", "SubResult", "run_sub", "expand_models", "rgb_triple"]

#: the headline columns of the summary of several models: (key, header)
SUMMARY_COLUMNS = (("s_plus", "s+"), ("chance_s_plus", "chance s+"), ("s_minus", "s-"), ("chance_s_minus", "chance s-"))


def rgb_triple(text: str) -> tuple[float, ...]:
    """Three comma-separated numbers (R,G,B): the ``type=`` of ``--mean`` / ``--std``."""
    values = tuple(float(v) for v in text.split(","))
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated numbers (R,G,B), got {text!r}")
    return values


@dataclass(frozen=True)
class ScoredModel:
    """One model to score.

    Attributes:
        name: the ``--model`` text (for the report and the summary).
        pretrained: its open_clip weights tag, or ``None``.
        spec: what :func:`~concept_grounding.evaluation.evaluate_sub` loads: the resolved
            :class:`~concept_grounding.hub.ModelSpec` (``None``: ``name`` itself).
    """

    name: str
    pretrained: str | None = None
    spec: Any = None

    @property
    def folder(self) -> str:
        """Its report folder among several (``name-tag`` or the path's last part, slugged)."""
        from .artifacts import model_slug

        return model_slug(f"{self.name}-{self.pretrained}" if self.pretrained else Path(self.name).name or self.name)

    @property
    def row_name(self) -> str:
        """Its name in the summary table: the model, with its weights tag when it has one."""
        return f"{self.name} ({self.pretrained})" if self.pretrained else self.name


def expand_models(models: list[str], pretrained: str | None) -> list[tuple[str, str | None]]:
    """``--model`` values as ``(model, weights tag)``: ``paper`` is SUB Table 2's six
    (:data:`~concept_grounding.bench.config.PAPER_CLIP_MODELS`, with their own tags); every
    other model takes ``pretrained``.

    >>> expand_models(["paper", "x"], "openai")[0], expand_models(["paper", "x"], "openai")[-1]
    (('ViT-B-32', 'openai'), ('x', 'openai'))
    """
    from .config import PAPER_CLIP_MODELS

    out: list[tuple[str, str | None]] = []
    for model in models:
        out += list(PAPER_CLIP_MODELS) if model == "paper" else [(model, pretrained)]
    return out


@dataclass(frozen=True)
class SubConfig:
    """What to score, on which SUB set, and how (each setting is a ``sub`` flag).

    ``models`` are given by the command (resolved ``--model`` values); ``concept_names`` is a
    named set or the resolved list of a ``--concept-names`` file.
    """

    models: tuple[ScoredModel, ...] = ()
    sub: str | None = setting(None, "SUB source: local copy or 'Jessica-bader/SUB' (default: the world's)")
    split: str | None = setting(None, "split of the SUB source (default: its only one, or 'test')")
    cub_root: str | None = setting(
        None, "CUB_200_2011 folder whose class-level labels give S- to sources without it (SUB's Hub copy)"
    )
    protocol: str = setting(
        "paper",
        "'paper' (docs/sub_accuracy.md) or 'official' (SUB's published evaluation code)",
        choices=("paper", "official"),
    )
    concept_names: Any = setting(
        None,
        "the model's columns: cub_312, cbm_112, sub, or a file with one CUB attribute "
        "name or integer per line; integers are 0-based indices into CUB's 312 "
        "attributes in attributes.txt order (0 = has_bill_shape::curved_(up_or_down)) "
        "unless --index-base says otherwise (default: the factory's names, or a "
        "pytorch-concepts model's own)",
    )
    index_base: str = setting(
        "cub_312",
        "what integer concept names are: cub_312, 0-based indices into CUB's 312 "
        "attributes; cbm_112, 0-based indices into Koh et al.'s 112; cub_id, CUB's "
        "own 1-based attribute ids as written in attributes.txt (default: "
        "%(default)s)",
        choices=("cub_312", "cbm_112", "cub_id"),
    )
    output: str | None = setting(None, "which part of a tuple / dict / dataclass output holds the concepts")
    outputs: str | None = setting(
        None, "the concept output is logits (default) or probabilities", choices=("logits", "probabilities")
    )
    image_size: int | None = setting(None, "resize images to this side (px)", parse=int)
    mean: tuple[float, ...] | None = setting(
        None,
        "per-channel mean the model was trained with, e.g. "
        "0.485,0.456,0.406 (a plain module needs --mean and --std, a "
        "transform from its factory, or --no-normalize)",
        parse=rgb_triple,
    )
    std: tuple[float, ...] | None = setting(None, "per-channel std, e.g. 0.229,0.224,0.225", parse=rgb_triple)
    normalize: bool | None = setting(
        None,
        "feed a plain module [0, 1] pixels, unnormalised (the explicit choice instead of --mean/--std)",
        flag="--no-normalize",
        action="store_false",
    )
    include_none: bool = setting(False, "open-vocabulary: add the 'none' prompt (paper)", action="store_true")
    device: str | None = setting(None, "e.g. cpu, cuda, cuda:1 (default: where the model is)")
    dtype: str | None = setting(
        None, "precision the model runs in (default: the model's own)", choices=("float32", "bfloat16", "float16")
    )
    batch_size: int = setting(64, "images per forward pass", parse=int)
    world_size: int = setting(
        64,
        "world SUB export: image side (px; the model's own input side is --image-size)",
        flag="--size",
        aliases=("--world-size",),
        parse=int_at_least(32),
    )
    world_seed: int = setting(0, "world SUB export: seed", parse=int)
    per_pairing: int = setting(1, "world SUB export: images per (class, attribute)", parse=int)
    classes: tuple[str, ...] | None = setting(
        None, "world SUB export: class folder names (default: 33)", nargs="*", convert=tuple_or_none
    )
    save_scores: bool = setting(False, "also write the score matrix (scores.npz)", action="store_true")
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")

    def __post_init__(self) -> None:
        if int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")

    def folders(self) -> list[str]:
        """The report folder of each model under ``out``: ``out`` itself for one model."""
        return ["."] if len(self.models) == 1 else [m.folder for m in self.models]

    def model_options(self) -> dict[str, Any]:
        """Keywords of :func:`~concept_grounding.evaluation.evaluate_sub` for the model's adapter
        (an integer ``output`` as an index)."""
        options: dict[str, Any] = dict(
            concept_names=self.concept_names,
            output=self.output,
            outputs=self.outputs,
            mean=self.mean,
            std=self.std,
            normalize=self.normalize,
        )
        if self.index_base != "cub_312":
            options["index_base"] = self.index_base
        if self.output is not None and self.output.lstrip("-").isdigit():
            options["output"] = int(self.output)
        return options


@dataclass
class SubResult:
    """The scores of every model of ``config.models``, in order (one
    :class:`~concept_grounding.evaluation.sub.SubEvaluation` each)."""

    config: SubConfig
    evaluations: list[SubEvaluation] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per model: name, folder and the headline scores."""
        return [
            {"name": m.row_name, "folder": folder, **{k: getattr(e, k) for k, _ in SUMMARY_COLUMNS}}
            for m, folder, e in zip(self.config.models, self.config.folders(), self.evaluations)
        ]

    def save(self, out: str | Path) -> Path:
        """Write each model's report folder (with ``scores.npz`` when ``config.save_scores``) and,
        for several models, ``<out>/report.md`` and ``<out>/results.json`` summarising them;
        returns ``<out>/report.md``. Under ``accelerate launch`` only the main process writes."""
        from ..evaluation.distributed import process_info

        out = Path(out)
        if not process_info().is_main:
            return out / "report.md"
        for folder, evaluation in zip(self.config.folders(), self.evaluations):
            evaluation.save(out / folder if folder != "." else out, scores=self.config.save_scores)
        if len(self.evaluations) > 1:
            write_summary(self.rows(), out)
        return out / "report.md"


def write_summary(rows: list[dict[str, Any]], out: Path) -> Path:
    """``<out>/report.md``: one row per model (s+ / s- with their chance), each linking its
    report; ``<out>/results.json``: the rows."""
    from ..evaluation.report import score_cells
    from ..fileio import markdown_table, write_report

    table = markdown_table(
        *score_cells([{**r, "name": f"[{r['name']}]({r['folder']}/report.md)"} for r in rows], SUMMARY_COLUMNS)
    )
    return write_report(out, rows, f"# SUB accuracy of {len(rows)} models\n\n{table}\n")[1]


def source_options(config: SubConfig) -> dict[str, Any]:
    """Keywords of :func:`~concept_grounding.evaluation.sub.load_sub_source`: the world
    export's settings without ``sub``; else the split and, with ``cub_root``, CUB's
    class-level labels (which give S- to a source without it)."""
    if config.sub is None:
        return {
            "image_size": config.world_size,
            "seed": config.world_seed,
            "per_pairing": config.per_pairing,
            "classes": list(config.classes) if config.classes else None,
        }
    options: dict[str, Any] = {"split": config.split}
    if config.cub_root:
        from ..loaders import load_cub
        from ..vocabulary import load_vocabulary
        from .data import class_matrix

        train = load_cub(config.cub_root, min_class_count=None, progress=config.progress)["train"]
        names = tuple(train.features["label"].names)
        options.update(
            class_attributes=class_matrix(train, len(names), load_vocabulary().num_attributes), class_names=names
        )
    return options


def run_sub(config: SubConfig) -> SubResult:
    """Score every model of ``config`` on its SUB set (:func:`~concept_grounding.evaluation.evaluate_sub`,
    one call per model, the SUB source's options computed once); nothing is written."""
    from ..evaluation import evaluate_sub

    if not config.models:
        raise ValueError("models: give at least one model to score")
    options = source_options(config)
    result = SubResult(config)
    for model in config.models:
        result.evaluations.append(
            evaluate_sub(
                model.spec if model.spec is not None else model.name,
                config.sub,
                protocol=config.protocol,
                batch_size=config.batch_size,
                device=config.device,
                dtype=config.dtype,
                progress=config.progress,
                source_options=options,
                image_size=config.image_size,
                include_none=config.include_none,
                pretrained=model.pretrained,
                **config.model_options(),
            )
        )
    return result
