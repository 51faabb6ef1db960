"""``concept-grounding curate``: SUB's curation by human answers (Sec. 4.3, App. E).

Reads the candidates (``--candidates``: a ``generate`` / ``filter`` folder with
``metadata.jsonl``) and the answers (``--annotations``: the ``annotate`` store or its Parquet
export), applies SPEC 2b's rules and writes the curated dataset in SUB's Hub layout
(``<out>/dataset``, which ``load_sub`` reads), the report, Figs. 6 and 9 and the annotations
as Parquet. The job is :func:`concept_grounding.curation.curate_job.run_curate`.
"""

from __future__ import annotations

import argparse

from concept_grounding.commands._types import existing_dir, existing_file, float_range, output_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    unit = float_range(0.0, 1.0)
    parser.add_argument("--candidates", required=True, type=existing_dir,
                        help="folder with metadata.jsonl (generate or filter output)")
    parser.add_argument("--annotations", required=True, type=existing_file,
                        help="the annotation store (.db) of `annotate`, or its Parquet export")
    parser.add_argument("--out", required=True, type=output_dir, help="folder for the dataset and the report")
    parser.add_argument("--truth", type=existing_file, default=None,
                        help="gold answers (truth.jsonl) to measure each annotator's accuracy (simulated annotators)")
    parser.add_argument("--world-seed", type=int, default=0,
                        help="the bird world's seed when the candidates come from it (class-level attributes, Fig. 6)")
    parser.add_argument("--not-world", action="store_true",
                        help="the candidates do not come from the bird world (S+ = S- by study-2 majority only)")
    parser.add_argument("--min-yes", type=unit, default=0.90,
                        help='keep an attribute iff its share of "yes" to Q1 is at least this')
    parser.add_argument("--min-pairing-score", type=unit, default=0.5,
                        help="drop a pairing whose mean Q1 score is below this (low accuracy)")
    parser.add_argument("--max-deviation", type=unit, default=0.5,
                        help='drop a pairing whose share of "yes" to Q2 is above this (excessive modification)')


def run(args: argparse.Namespace) -> int:
    from concept_grounding.curation.curate import CurationRules
    from concept_grounding.curation.curate_job import CurateConfig, run_curate

    config = CurateConfig(args.candidates, args.annotations, args.out,
                          CurationRules(args.min_yes, args.min_pairing_score, args.max_deviation), truth=args.truth,
                          world_seed=None if args.not_world else args.world_seed)
    res = run_curate(config)
    human = ""
    if res.human is not None:
        b, g = res.human["binary"], res.human["group"]
        human = (f"; Human s+/s- binary {100 * b['s_plus']:.1f}/{100 * b['s_minus']:.1f}, "
                 f"group {100 * g['s_plus']:.1f}/{100 * g['s_minus']:.1f}")
    print(f"kept {len(res.kept)} images, {int(res.attributes.kept.sum())} of {len(res.attributes)} attributes"
          f"{human}; report: {res.report}")
    return 0
