"""SUB's central claim where the truth is known: TDG vs prompting on the world-trained Flux.

One command reproduces every table (README results, docs/tdg_world/)::

    .venv/bin/python benchmarks/bench_tdg_world.py --out docs/tdg_world

Stages (``--stages``, all seeded; judges are cached under ``--out``):

1. **validate**: a grounded judge (:class:`~concept_grounding.judge.WorldJudge`, trained on
   typical renders, their exact edits and deviation-rate-1 renders of the generator's own
   world, at its resolution) is validated on held-out exact edits of every SUB pairing and
   on ordinary renders, raw and after the world VAE's round trip
   (:func:`~concept_grounding.judge.validate_judge`). A judge that misses the bars gets no
   substitution finding: the report prints the validation table and says why. Attribute
   groups below the bars are reported and left out of the finding.
2. **quality** on in-distribution prompts, by the judge: ``a photo of a {species}``
   (species agreement), ``a photo of a {species} with {S}`` for class-level attributes
   (prompted attributes found) and the colour guide prompt ``a photo of a bird with {S+}``
   (S+ shown), next to real renders and their VAE reconstructions.
3. **substitution** for every SUB pairing of the world (each held out of the generator's
   training), ``--images`` images each, ``prompting`` (c_R alone) vs ``tdg`` (c_R tied to
   c_G, SUB's schedule per category), same seeds and steps. Success = the judge finds S+
   and keeps the species; S- removed = none of the class's S- values found; the mean judge
   p(S+); 95 % bootstrap intervals over pairings; overall, per group, per pairing, and
   restricted to pairings whose guide shows S+. For pattern / shape pairings, also TDG with
   SUB App. B's guide bird and with a generic "bird" guide.
4. **sweep**: constant eta 0, 0.5, 0.8, 0.95, 1 and the paper schedules: S+, species, success.
5. **filter**: the VQA filter (world-CLIP scorer) against the judge: AUROC of its p(S+)
   for the judge's S+ verdict, success among kept images; and the scorer's own validation
   on exact edits (:func:`~concept_grounding.judge.validate_scorer_on_world`).
6. **timing**: TDG pair vs FluxPipeline batch-2 (CPU time, interleaved rounds, A/A control:
   :func:`concept_grounding.tdg.timing.interleave`).

Writes ``report.md``, ``results.json``, ``validation.md`` and ``contact_sheet.png`` under ``--out``.
The stages live in :mod:`experiments.world_tdg` beside this script (tested in benchmarks/tests/test_world_tdg.py);
this script parses the arguments into its ``WorldTDGSettings`` and calls ``run_world_tdg``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.world_tdg import STAGES, WorldTDGSettings, check_settings, run_world_tdg

from concept_grounding.errors import UsageError
from concept_grounding.worldflux.loader import WORLD_STEPS, WORLD_TRUE_CFG


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="report folder (judges are cached here)")
    p.add_argument("--pipeline", type=Path, default=None, help="world Flux folder (default: the shipped one)")
    p.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES), help="stages to run (default: all)")
    p.add_argument("--images", type=int, default=1, help="images per SUB pairing and method")
    p.add_argument("--quality-images", type=int, default=4, help="images per species for the quality prompts")
    p.add_argument("--steps", type=int, default=WORLD_STEPS, help="sampling steps (both methods)")
    p.add_argument(
        "--cfg", type=float, default=WORLD_TRUE_CFG, help="true CFG scale against the empty prompt (both methods)"
    )
    p.add_argument("--sweep-pairings", type=int, default=96, help="pairings in the eta sweep")
    p.add_argument("--sweep-etas", type=float, nargs="*", default=[0.0, 0.5, 0.8, 0.95, 1.0])
    p.add_argument(
        "--judge-per-class", type=int, default=150, help="training renders per species and kind for the judge"
    )
    p.add_argument(
        "--judge-epochs",
        type=int,
        default=32,
        help="judge training epochs (16 left forehead colour, bill shape and breast pattern below the bars)",
    )
    p.add_argument(
        "--validation-edits",
        type=int,
        default=3,
        help="held-out exact edits per SUB pairing to validate the judge (3: at least 78 per group)",
    )
    p.add_argument("--validation-renders", type=int, default=10, help="held-out ordinary renders per species")
    p.add_argument("--clip-train", type=int, default=80, help="renders per species to train the filter's world CLIP")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--batch", type=int, default=64, help="images per pipeline call")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit-pairings", type=int, default=None, help="debug: only the first N pairings")
    p.add_argument(
        "--export-judge",
        type=Path,
        default=None,
        help="also write the validated judge (safetensors) and its model card to this folder",
    )
    p.add_argument("--device", default="cpu", help="torch device of the pipeline (e.g. cuda)")
    args = p.parse_args(argv)
    try:
        check_settings(WorldTDGSettings(**vars(args)))
    except UsageError as err:
        p.error(str(err))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python benchmarks/bench_tdg_world.py " + " ".join(argv if argv is not None else sys.argv[1:])
    _, refused = run_world_tdg(WorldTDGSettings(**vars(args)), command)
    print((args.out / "report.md").read_text())
    return 3 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
