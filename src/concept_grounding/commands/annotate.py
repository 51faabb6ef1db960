"""``concept-grounding annotate``: SUB's human studies (App. E) as a Gradio app over a SQLite store.

Samples the studies' images from ``--candidates`` (40 per attribute for study 1, 3 per
pairing for study 2; already-stored images are kept, so rerunning resumes) into ``--db`` and
launches the app (:mod:`concept_grounding.curation.annotate_app`). ``--simulate`` instead
lets simulated annotators of the given accuracies answer through the same store calls, from
the candidates' ``truth.jsonl`` (``--world-task`` first writes bird-world candidates with
known failures there) or, without one, from what each candidate was asked (a ``generate`` / ``filter``
folder's rows: S+ applied, the reference bird kept); ``--export`` writes the answers as Parquet; ``--hub-repo`` pushes
them to a Hub dataset repo while the app runs (:mod:`concept_grounding.curation.hub_sync`).

Who annotates: ``--annotators ann,bob`` gives each a personal link with a secret token (printed
once, stored hashed); the app serves only token holders. ``--space-folder`` writes the app as a
Hugging Face Space instead, where annotators sign in with Hugging Face
(:mod:`concept_grounding.curation.annotate_space`).
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
        from concept_grounding.curation.simulate import SimulatedAnnotator, asked_truth, read_truth, run_annotators

        truth_file = Path(config.truth) if config.truth else root / "truth.jsonl"
        if config.truth and not truth_file.is_file():
            raise UsageError(f"--simulate: no truth file {truth_file}", argument="--truth")
        if truth_file.is_file():
            truth = read_truth(truth_file)
        else:  # generated candidates: the truth of what generate was asked (S+ applied, the reference bird kept)
            truth = asked_truth(rows)
            print("no truth.jsonl: the simulated annotators answer what generate was asked (S+ applied, the "
                  "reference bird kept)")
        anns = [SimulatedAnnotator(f"sim{i}-{a:g}", a, seed=i) for i, a in enumerate(config.simulate)]
        print(f"{run_annotators(store, anns, truth)} answers submitted by {_count(len(anns), 'simulated annotator')}")
    if config.export:
        print(f"answers: {store.to_parquet(config.export)}")
    if config.status:
        for study in (1, 2):
            done, total = store.complete(study)
            print(f"study {study}: {done} of {total} images have their {_count(store.k, 'annotator')}")
        people = store.annotators()
        print(f"{_count(len(people), 'annotator')} answered so far")
        for name, counts in people.items():
            print(f"  {name}: " + ", ".join(f"study {s} {_count(n, 'image')}" for s, n in counts.items()))
    url = f"http://127.0.0.1:{config.port}/"
    for name in config.annotators:
        token = store.issue_token(name, replace=config.reissue)
        print(f"  {name}: {url}?token={token}" if token else
              f"  {name}: has a personal link already (--reissue replaces it; the old one then stops working)")
    if config.space_folder is not None:
        from concept_grounding.curation.annotate_space import write_space

        print(f"Space: {write_space(config, rows, root, Path(config.db))} (push it as a Gradio Space; "
              "annotators sign in with Hugging Face)")
    if config.serves_app:
        from concept_grounding.curation.annotate_app import on_spaces, serve_app
        from concept_grounding.extras import require_extra

        require_extra("space", "concept-grounding annotate's app (without --simulate or --export)")
        if not on_spaces() and not store.token_holders():
            raise UsageError("no annotator has a personal link yet: name them (--annotators ann,bob); each gets a "
                             "link with a secret token", argument="--annotators")

        paths = {candidate_id(r): r["file_name"] for r in rows}

        def image_path(item):
            p = paths[str(item.meta["candidate"])]
            return p if Path(p).is_absolute() else str(root / p)

        if config.hub_repo:
            from concept_grounding.curation.hub_sync import AnnotationSync

            AnnotationSync(store, repo_id=config.hub_repo, folder=Path(config.db).parent / "hub-sync", every=config.hub_every)
        serve_app(store, image_path, port=config.port, private=[root])
    return 0


def _count(n: int, noun: str) -> str:
    """``"1 annotator"``, ``"3 annotators"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
