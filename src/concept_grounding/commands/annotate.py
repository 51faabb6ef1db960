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

from concept_grounding import settings
from concept_grounding.curation.annotate_job import AnnotateConfig
from concept_grounding.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    settings.add_arguments(parser, AnnotateConfig)


def _world_task(folder) -> None:
    from concept_grounding.curation.simulate import WorldTask, broken_task, world_candidates, write_candidates

    world = WorldTask().world()
    write_candidates(world_candidates(broken_task(WorldTask(), world), world), folder, world)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from concept_grounding.curation.annotations import AnnotationStore
    from concept_grounding.curation.curate_job import read_candidates
    from concept_grounding.curation.sampling import candidate_id, study_items

    config: AnnotateConfig = settings.from_args(AnnotateConfig, args)
    if config.world_task:
        _world_task(config.candidates)
    rows, root = read_candidates(config.candidates)
    store = AnnotationStore(config.db, k=config.k)
    added = store.add_images(study_items(rows, per_attribute=config.per_attribute, per_pairing=config.per_pairing,
                                         seed=config.seed))
    print(f"{added} new images in {config.db} (study 1: {store.complete(1)[1]}, study 2: {store.complete(2)[1]})")
    if config.simulate is not None:
        from concept_grounding.curation.simulate import SimulatedAnnotator, read_truth, run_annotators

        truth_file = Path(config.truth) if config.truth else root / "truth.jsonl"
        if not truth_file.is_file():
            raise UsageError(f"--simulate needs the candidates' truth ({truth_file} is missing)", argument="--truth")
        truth = read_truth(truth_file)
        anns = [SimulatedAnnotator(f"sim{i}-{a:g}", a, seed=i) for i, a in enumerate(config.simulate)]
        print(f"{run_annotators(store, anns, truth)} answers submitted by {len(anns)} simulated annotators")
    if config.export:
        print(f"answers: {store.to_parquet(config.export)}")
    if config.status:
        for study in (1, 2):
            done, total = store.complete(study)
            print(f"study {study}: {done} of {total} images have their {store.k} annotators")
        for name, counts in store.annotators().items():
            print(f"  {name}: " + ", ".join(f"study {s} {n} images" for s, n in counts.items()))
    if config.serves_app:
        from concept_grounding.curation.annotate_app import build_app, launch_app
        from concept_grounding.extras import require_extra

        require_extra("space", "concept-grounding annotate's app (without --simulate or --export)")

        paths = {candidate_id(r): r["file_name"] for r in rows}

        def image_path(item):
            p = paths[str(item.meta["candidate"])]
            return p if Path(p).is_absolute() else str(root / p)

        if config.hub_repo:
            from concept_grounding.curation.hub_sync import AnnotationSync

            AnnotationSync(store, repo_id=config.hub_repo, folder=Path(config.db).parent / "hub-sync", every=config.hub_every)
        launch_app(build_app(store, image_path), server_port=config.port, allowed_paths=[str(root)])
    return 0
