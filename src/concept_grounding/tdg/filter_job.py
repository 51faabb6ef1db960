"""The ``filter`` job: SUB's VQA filter over a generated image folder, and its report (SUB Sec. 4.2).

:func:`filter_folder` (1) reads and checks ``<in>/metadata.jsonl`` from the ``generate`` job, (2) builds
the scorer (a named model is resolved before its library loads) and (3) keeps the top ``keep_fraction``
per pairing (:func:`~concept_grounding.tdg.filter.filter_records`); its result's ``save(out)`` (4) writes
the kept ``metadata.jsonl``, the report, every image's evidence and the contact sheet (SUB Fig. 5).
:func:`run_filter` does both. Scorers: ``FilterConfig.scorer`` (``oracle`` takes a judge's name or folder;
docs/judges.md). Errors name the command-line argument behind each setting. Manual: docs/tdg.md, "VQA filter";
the evidence: docs/sub_curation.md.

>>> FilterConfig(input=Path("gen"), out=Path("kept"), scorer="tiny-clip").keep_fraction
0.1
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, named, read_text_file
from ..settings import setting
from ..validators import existing_dir, output_dir, unit_interval
from ..vocabulary import load_vocabulary
from .filter import OptionScorer, filter_records, write_filter_report
from .filter_scorers import AttributeJudgeScorer, CLIPScorer, VisionLanguageScorer, tiny_clip_scorer

__all__ = ["DEFAULT_VLM", "SCORERS", "FilterConfig", "FilterJobResult", "build_scorer", "filter_folder", "run_filter"]

#: SUB filtered with InternVL-2.5-8B, whose Hub repository ships its own modelling code
#: (``AutoModel`` + ``trust_remote_code``, no logits API that AutoModelForImageTextToText
#: loads). Converted with transformers' ``convert_internvl_weights_to_hf.py`` it loads
#: natively (``--vlm-model <converted folder>``; the architecture is tested on
#: :func:`~concept_grounding.testing.save_tiny_internvl`). The default is the same family's
#: native transformers checkpoint.
DEFAULT_VLM = "OpenGVLab/InternVL3-8B-hf"
SCORERS = ("vlm", "clip", "world-judge", "tiny-clip", "oracle")
#: An attribute judge: N PIL images -> (N, 312) independent presence probabilities.
AttributeJudge = Callable[[Sequence[Any]], np.ndarray]


@dataclass(frozen=True)
class FilterConfig:
    """What to filter, where to write, and with which scorer.

    Args:
        input: the generated image folder (with ``metadata.jsonl``).
        out: folder for the kept list and the report.
        scorer: one of :data:`SCORERS`.
        vlm_model: Hub id or folder that ``AutoModelForImageTextToText`` loads (``"vlm"``).
        trust_remote_code: let ``vlm_model``'s repository run its own modelling code.
        clip_model, clip_pretrained: open_clip architecture and weights tag (``"clip"``).
        oracle: ``'module:function'``, or a judge's name or folder for ``judge_loader`` (``"oracle"``).
        keep_fraction: fraction of the generated images kept per pairing, in (0, 1] (SUB: 0.1).
        judge_loader: a judge's name or folder -> :data:`AttributeJudge`
            (:func:`concept_grounding.judge.attribute_judge`; also the ``"world-judge"`` scorer's).
        check_groups: other attribute groups asked too; an image whose answer there is none of
            the reference class's ``class_values`` is not kept (``other_changed``; default none,
            the paper's filter; see :func:`~concept_grounding.tdg.filter.filter_records`).
        class_values: class -> its class-level attribute names (with ``check_groups``).
        validate: ``scorer -> report`` run on the scorer before any image is filtered (the command's:
            :func:`~concept_grounding.judge.validate_scorer_on_world` on the bird world's exact edits); its
            report (``to_dict()``, ``to_markdown()``) is saved as ``scorer_validation.json`` / ``.md``.
            With it, ``input`` may be ``None``: the scorer is only validated.
    """

    input: Path | None = setting(
        help="generated image folder (with metadata.jsonl); optional with --validate-on-world",
        parse=existing_dir,
        flag="--in",
    )
    out: Path = setting(help="folder for the kept list and the report", parse=output_dir)
    scorer: str = setting(
        "vlm",
        "what judges the images: a VLM's yes/no answer, CLIP similarity, the shipped world "
        "judge (world-judge: validated on the bird world), a random tiny CLIP (tiny-clip: "
        "plumbing only) or a concept model (--oracle)",
        choices=SCORERS,
    )
    vlm_model: str = setting(
        DEFAULT_VLM, "a VLM that AutoModelForImageTextToText loads: Hub id or local folder (--scorer vlm)"
    )
    trust_remote_code: bool = setting(
        False,
        "let --vlm-model's repository run its own Python modelling code (off by "
        "default; only for repositories you trust)",
        action="store_true",
    )
    clip_model: str = setting("ViT-B-32", "open_clip architecture (--scorer clip)")
    clip_pretrained: str = setting(
        "openai", "open_clip weights tag (--scorer clip; 'random' for random weights on purpose)"
    )
    oracle: str | None = setting(
        None,
        "the attribute judge: a concept model folder saved by `bench`, a world judge "
        "folder, a registered judge's name (world), or 'module:function' mapping a "
        "list of PIL images to (N, 312) probabilities (--scorer oracle; default: none)",
    )
    keep_fraction: float = setting(
        0.1, "fraction of the generated images kept per pairing, in (0, 1] (SUB: 0.1)", parse=unit_interval
    )
    judge_loader: Callable[[str], AttributeJudge] | None = field(default=None, compare=False, repr=False)
    check_groups: tuple[str, ...] = setting(
        (),
        "also ask these attribute groups (e.g. bill_color wing_color) and discard an image whose answer is none of "
        "the reference class's class-level values there (another attribute changed; default: none, the paper's "
        "filter)",
        nargs="*",
        metavar="GROUP",
        convert=tuple,
    )
    class_values: Mapping[str, Collection[str]] | None = field(default=None, compare=False, repr=False)
    validate: Callable[[OptionScorer], Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {SCORERS}, got {self.scorer!r}")
        unknown = [g for g in self.check_groups if g not in load_vocabulary().groups]
        if unknown:
            raise UsageError(
                f"unknown attribute group(s) {unknown}",
                argument=named("check_groups"),
                hint="groups are written like bill_color, wing_pattern",
            )


@dataclass(frozen=True)
class FilterJobResult:
    """What :func:`filter_folder` kept; ``save(out)`` writes it (the job shape of :mod:`concept_grounding.jobs`).

    Attributes:
        config: the job's configuration (``config.input`` is the generated folder the rows name).
        generated: rows read from ``<in>/metadata.jsonl``.
        kept: the kept rows (absolute ``file_name``, ``target_probability``).
        report: the filter report (per-pairing, per-attribute and per-reason counts).
        evidence_rows: one row per image, kept or not (every answer and the reason), ``file_name``
            relative to ``config.input``.
        validation: the scorer's validation report (``config.validate``), else ``None``.
    """

    config: FilterConfig
    generated: int
    kept: list[dict]
    report: dict[str, Any]
    evidence_rows: list[dict] = field(default_factory=list, repr=False)
    validation: Any = None

    def save(self, out: str | Path) -> Path:
        """Write ``scorer_validation.json`` / ``.md`` (with a validation), then ``metadata.jsonl`` (the kept
        rows), ``filter_report.json`` / ``.md``, ``filter_evidence.jsonl`` and ``filter_sheet.png`` under
        ``out``; returns ``filter_report.md``'s path (``scorer_validation.md``'s when nothing was filtered)."""
        from ..fileio import atomic_write_lines
        from .filter_sheet import evidence_sheet

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        if self.validation is not None:
            atomic_write_lines(out / "scorer_validation.json", [json.dumps(self.validation.to_dict(), indent=1)])
            atomic_write_lines(out / "scorer_validation.md", [self.validation.to_markdown()])
        if self.config.input is None:
            return out / "scorer_validation.md"
        src = Path(self.config.input)
        (out / "metadata.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in self.kept))
        _, md_path = write_filter_report(self.report, out)
        (out / "filter_evidence.jsonl").write_text(
            "".join(
                json.dumps({**e, "file_name": str((src / e["file_name"]).resolve())}, sort_keys=True) + "\n"
                for e in self.evidence_rows
            )
        )
        evidence_sheet(self.evidence_rows, src, out / "filter_sheet.png")
        return md_path

    @property
    def metadata(self) -> Path:
        """``<config.out>/metadata.jsonl``: the kept rows, where :func:`run_filter` writes them."""
        return Path(self.config.out) / "metadata.jsonl"


def read_generated_records(src: Path) -> list[dict]:
    """Rows of ``<src>/metadata.jsonl``; a missing file, bad JSON, missing keys or images name the line."""
    path = src / "metadata.jsonl"
    if not path.is_file():
        raise UsageError(
            "no metadata.jsonl here",
            argument=named("input"),
            file=src,
            hint=f"point {named('input')} at a folder written by `concept-grounding generate`",
        )
    records = []
    for n, line in enumerate(read_text_file(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"not valid JSON ({err.msg})", file=path, line=n) from None
        missing = [
            k for k in ("file_name", "reference_class", "target_attribute") if not isinstance(row, dict) or k not in row
        ]
        if missing:
            raise UsageError(f"row lacks {missing}", file=path, line=n)
        if not (src / row["file_name"]).is_file():
            raise UsageError(f"image {row['file_name']!r} not found in {src}", file=path, line=n)
        records.append(row)
    if not records:
        raise UsageError("lists no images", file=path)
    return records


def _loaded_judge(config: FilterConfig, spec: str) -> OptionScorer:
    if config.judge_loader is None:
        raise ValueError(f"judge_loader: needed to load the judge {spec}")
    return AttributeJudgeScorer(config.judge_loader(spec))


def _oracle_scorer(config: FilterConfig) -> OptionScorer:
    """The attribute-judge scorer of ``config.oracle`` (a saved folder, a judge's name, or ``'module:function'``)."""
    if config.oracle and Path(config.oracle).is_dir():
        return _loaded_judge(config, config.oracle)
    if config.oracle and ":" not in config.oracle and config.judge_loader is not None:
        try:
            return _loaded_judge(config, config.oracle)
        except ValueError as err:
            raise UsageError(str(err), argument=named("oracle")) from None
    if not config.oracle or ":" not in config.oracle:
        raise UsageError(
            "must be a saved concept model folder, a judge's name or 'module:function' with --scorer "
            f"oracle, got {config.oracle!r}",
            argument=named("oracle"),
        )
    import importlib

    module, name = config.oracle.split(":", 1)
    try:
        return AttributeJudgeScorer(getattr(importlib.import_module(module), name))
    except (ImportError, AttributeError) as err:
        raise UsageError(f"cannot import {config.oracle!r}: {err}", argument=named("oracle")) from None


def build_scorer(config: FilterConfig) -> OptionScorer:
    """The configured scorer; named models are resolved (local, cached, or a fast clear error) before loading."""
    if config.scorer == "tiny-clip":
        return tiny_clip_scorer()
    if config.scorer == "clip":
        from ..hub import resolve_open_clip

        resolve_open_clip(config.clip_model, config.clip_pretrained, "--clip-model", "--clip-pretrained")
        from ..models.clip import load_clip

        return CLIPScorer(load_clip(config.clip_model, backend="open_clip", pretrained=config.clip_pretrained))
    if config.scorer == "oracle":
        return _oracle_scorer(config)
    if config.scorer == "world-judge":
        return _loaded_judge(config, "world-judge")
    from ..hub import resolve_model_spec

    name = resolve_model_spec(config.vlm_model, "--vlm-model", family="hub").target  # before transformers: fail fast
    from transformers import AutoModelForImageTextToText, AutoProcessor

    remote = bool(config.trust_remote_code)
    processor = AutoProcessor.from_pretrained(name, trust_remote_code=remote)
    model = AutoModelForImageTextToText.from_pretrained(name, trust_remote_code=remote).eval()
    return VisionLanguageScorer(model, processor)


def filter_folder(config: FilterConfig, scorer: OptionScorer | None = None) -> FilterJobResult:
    """Filter ``config.input`` (steps 1-3 of the module docstring; nothing is written), with
    ``scorer`` if given, else :func:`build_scorer`'s; ``config.validate`` runs on it first."""
    from PIL import Image
    from tqdm.auto import tqdm

    # 1. inputs and scorer, checked before any image is scored (then validated, when asked)
    if config.input is None and config.validate is None:
        raise UsageError(
            "is required (or pass --validate-on-world to validate the scorer only)", argument=named("input")
        )
    src = Path(config.input) if config.input is not None else None
    records = read_generated_records(src) if src is not None else []
    scorer = scorer if scorer is not None else build_scorer(config)
    validation = config.validate(scorer) if config.validate is not None else None
    if src is None:
        return FilterJobResult(config, 0, [], {}, validation=validation)

    # 2. score pairing by pairing, keep the top fraction
    bar = tqdm(total=len(records), desc="VQA filter", unit="img")

    def probs_for(rows: list[dict], question: str, options: list[str]) -> np.ndarray:
        images = [Image.open(src / r["file_name"]).convert("RGB") for r in rows]
        group = rows[0]["group"] if "group" in rows[0] else rows[0]["target_attribute"].split("::")[0][4:]
        probs = scorer.score(images, question, options, group)
        bar.update(len(rows))
        return probs

    result = filter_records(
        records, probs_for, config.keep_fraction, check_groups=config.check_groups, class_values=config.class_values
    )
    bar.close()

    # 3. the kept list, with absolute file names
    kept = [{**r, "file_name": str((src / r["file_name"]).resolve())} for r in result.kept]
    return FilterJobResult(config, len(records), kept, result.report, list(result.evidence), validation)


def run_filter(config: FilterConfig, scorer: OptionScorer | None = None) -> FilterJobResult:
    """:func:`filter_folder`, then save the result into ``config.out`` (step 4 of the module docstring)."""
    result = filter_folder(config, scorer)
    result.save(config.out)
    return result
