"""``concept-grounding annotate``: SUB's human studies (App. E) as a Gradio app over a SQLite store.

Samples the studies' images from ``--candidates`` (40 per attribute for study 1, 3 per
pairing for study 2; already-stored images are kept, so rerunning resumes) into ``--db`` and
launches the app (:mod:`concept_grounding.curation.annotate_app`). ``--simulate`` instead
lets simulated annotators of the given accuracies answer through the same store calls, from
the candidates' ``truth.jsonl`` (``--world-task`` first writes bird-world candidates with
known failures there); ``--export`` writes the answers as Parquet; ``--hub-repo`` pushes
them to a Hub dataset repo while the app runs (:mod:`concept_grounding.curation.hub_sync`).
"""

from __future__ import annotations

import argparse

from concept_grounding.commands._types import float_range, int_at_least, output_dir
from concept_grounding.errors import UsageError


def _accuracies(text: str) -> list[float]:
    unit = float_range(0.0, 1.0)
    return [unit(t) for t in text.split(",") if t.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--candidates", required=True, type=output_dir,
                        help="folder with metadata.jsonl (generate or filter output; --world-task writes one)")
    parser.add_argument("--db", required=True, help="the annotation store (SQLite file; created when missing)")
    parser.add_argument("--k", type=int_at_least(1), default=None,
                        help="annotators per image (default: 3 for a new --db, else the one it was made with)")
    parser.add_argument("--per-attribute", type=int_at_least(1), default=40, help="study-1 images per attribute")
    parser.add_argument("--per-pairing", type=int_at_least(0), default=3, help="study-2 images per pairing")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--world-task", action="store_true",
                        help="first write bird-world candidates (one failed attribute, one deviating pairing, "
                        "S+ = S- pairings) with their truth into --candidates")
    parser.add_argument("--simulate", type=_accuracies, default=None, metavar="ACC[,ACC...]",
                        help="no app: simulated annotators of these accuracies answer everything (needs truth.jsonl)")
    parser.add_argument("--truth", default=None,
                        help="the candidates' truth for --simulate (default: truth.jsonl beside --candidates' "
                             "metadata.jsonl; a filter output lies elsewhere: pass the generated folder's)")
    parser.add_argument("--export", type=str, default=None, help="write the answers to this Parquet file")
    parser.add_argument("--status", action="store_true",
                        help="no app: print each study's completion and each annotator's progress")
    parser.add_argument("--port", type=int, default=7861, help="the app's port")
    parser.add_argument("--hub-repo", default=None,
                        help="also push the answers (Parquet) to this Hub dataset repo while the app runs (default: no sync)")
    parser.add_argument("--hub-every", type=float_range(0.1), default=5.0, help="minutes between pushes (--hub-repo)")


def _world_task(folder) -> None:
    from concept_grounding.curation.simulate import WorldTask, broken_task, world_candidates, write_candidates

    world = WorldTask().world()
    write_candidates(world_candidates(broken_task(WorldTask(), world), world), folder, world)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from concept_grounding.curation.annotations import AnnotationStore
    from concept_grounding.curation.curate_job import read_candidates
    from concept_grounding.curation.sampling import candidate_id, study_items

    if args.world_task:
        _world_task(args.candidates)
    rows, root = read_candidates(args.candidates)
    store = AnnotationStore(args.db, k=args.k)
    added = store.add_images(study_items(rows, per_attribute=args.per_attribute, per_pairing=args.per_pairing,
                                         seed=args.seed))
    print(f"{added} new images in {args.db} (study 1: {store.complete(1)[1]}, study 2: {store.complete(2)[1]})")
    if args.simulate is not None:
        from concept_grounding.curation.simulate import SimulatedAnnotator, read_truth, run_annotators

        truth_file = Path(args.truth) if args.truth else root / "truth.jsonl"
        if not truth_file.is_file():
            raise UsageError(f"--simulate needs the candidates' truth ({truth_file} is missing)", argument="--truth")
        truth = read_truth(truth_file)
        anns = [SimulatedAnnotator(f"sim{i}-{a:g}", a, seed=i) for i, a in enumerate(args.simulate)]
        print(f"{run_annotators(store, anns, truth)} answers submitted by {len(anns)} simulated annotators")
    if args.export:
        print(f"answers: {store.to_parquet(args.export)}")
    if args.status:
        for study in (1, 2):
            done, total = store.complete(study)
            print(f"study {study}: {done} of {total} images have their {store.k} annotators")
        for name, counts in store.annotators().items():
            print(f"  {name}: " + ", ".join(f"study {s} {n} images" for s, n in counts.items()))
    if args.simulate is None and not args.export and not args.status:
        from concept_grounding.curation.annotate_app import build_app, launch_app
        from concept_grounding.extras import require_extra

        require_extra("space", "concept-grounding annotate's app (without --simulate or --export)")

        paths = {candidate_id(r): r["file_name"] for r in rows}

        def image_path(item):
            p = paths[str(item.meta["candidate"])]
            return p if Path(p).is_absolute() else str(root / p)

        if args.hub_repo:
            from concept_grounding.curation.hub_sync import AnnotationSync

            AnnotationSync(store, repo_id=args.hub_repo, folder=Path(args.db).parent / "hub-sync", every=args.hub_every)
        launch_app(build_app(store, image_path), server_port=args.port, allowed_paths=[str(root)])
    return 0
