"""``concept-grounding filter``: SUB's VQA filter over a generated image folder.

Reads ``<in>/metadata.jsonl`` (from ``concept-grounding generate``), scores every image's
multiple-choice question, keeps the top 10 % per pairing, and writes ``<out>/metadata.jsonl``
(kept rows, with ``target_probability``; ``file_name`` is the absolute path of the image in ``<in>``) plus
``filter_report.json`` / ``filter_report.md``. The job lives in
:mod:`concept_grounding.tdg.filter_job` (``FilterConfig``, ``run_filter``); this module
parses the arguments, maps them onto the config and prints.
"""

from __future__ import annotations

import argparse

from concept_grounding.commands._types import existing_dir, output_dir, unit_interval
from concept_grounding.tdg.filter_job import DEFAULT_VLM, SCORERS, FilterConfig, run_filter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="input", required=True, type=existing_dir,
                        help="generated image folder (with metadata.jsonl)")
    parser.add_argument("--out", required=True, type=output_dir, help="folder for the kept list and the report")
    parser.add_argument("--scorer", choices=SCORERS, default="vlm",
                        help="what judges the images: a VLM's yes/no answer, CLIP similarity, or a concept model (--oracle)")
    parser.add_argument("--vlm-model", default=DEFAULT_VLM,
                        help="a VLM that AutoModelForImageTextToText loads: Hub id or local folder (--scorer vlm)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="let --vlm-model's repository run its own Python modelling code (off by default; "
                        "only for repositories you trust)")
    parser.add_argument("--clip-model", default="ViT-B-32", help="open_clip architecture (--scorer clip)")
    parser.add_argument("--clip-pretrained", default="openai", help="open_clip weights tag (--scorer clip)")
    parser.add_argument("--oracle", help="a concept model folder saved by `bench` (the world's attribute oracle), or"
                        " 'module:function' mapping a list of PIL images to (N, 312) probabilities (--scorer oracle; default: none)")
    parser.add_argument("--keep-fraction", type=unit_interval, default=0.1,
                        help="fraction of the generated images kept per pairing, in (0, 1] (SUB: 0.1)")


def _concept_model_oracle(folder: str):
    """A concept model folder saved by ``bench`` as an attribute oracle (torch loads here)."""
    from concept_grounding.models.loading import concept_probability_oracle

    return concept_probability_oracle(folder)


def config_from_args(args: argparse.Namespace) -> FilterConfig:
    """The job's configuration (inputs and models are checked when the job runs)."""
    return FilterConfig(input=args.input, out=args.out, scorer=args.scorer, vlm_model=args.vlm_model,
                        trust_remote_code=args.trust_remote_code, clip_model=args.clip_model,
                        clip_pretrained=args.clip_pretrained, oracle=args.oracle, keep_fraction=args.keep_fraction,
                        oracle_loader=_concept_model_oracle)


def run(args: argparse.Namespace) -> int:
    result = run_filter(config_from_args(args))
    print(f"kept {len(result.kept)} of {result.generated} images; report: {result.report_md}")
    return 0
