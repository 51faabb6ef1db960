"""``concept-grounding annotate``: SUB's human studies (App. E) as a Gradio app over a SQLite store.

Samples the studies' images from ``--candidates`` (40 per attribute for study 1, 3 per
pairing for study 2; already-stored images are kept, so rerunning resumes) into ``--db`` and
launches the app (:mod:`concept_grounding.curation.annotate_app`). ``--simulate`` instead
lets simulated annotators of the given accuracies answer through the same store calls, from
the candidates' ``truth.jsonl`` (``--world-task`` first writes bird-world candidates with
known failures there) or, without one, from what each candidate was asked (a ``generate`` / ``filter``
folder's rows: S+ applied, the reference bird kept); ``--export`` writes the answers as Parquet; ``--hub-repo`` pushes
them to a Hub dataset repo while the app runs (:mod:`concept_grounding.curation.hub_sync`).

``--items DIR`` adds ConceptBed's rating study (App. G; an items folder written by
:func:`concept_grounding.conceptbed.export_rating_items`): 1-5 ratings, each image on its own
screen, in a tab beside SUB's; ``--simulate`` then also lets simulated raters (not people) rate
by the items' ``truth.jsonl``, and ``--status`` / ``--export`` report Krippendorff's alpha.

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

    from concept_grounding.curation.curate_job import read_candidates
    from concept_grounding.curation.rating_store import RatingStore
    from concept_grounding.curation.sampling import candidate_id, study_items

    config: AnnotateConfig = settings.from_args(AnnotateConfig, args)
    if config.candidates is None and config.items is None and (config.serves_app or not Path(config.db).is_file()):
        raise UsageError(
            "name --candidates (SUB's studies) or --items (ConceptBed's rating study)", argument="--candidates"
        )
    if config.world_task and config.candidates is None:
        raise UsageError(
            "--world-task writes its candidates into --candidates: name that folder", argument="--candidates"
        )
    if config.space_folder is not None and (config.items is not None or config.candidates is None):
        raise UsageError(
            "a Space holds SUB's studies from --candidates only; serve the rating study locally (--annotators)",
            argument="--space-folder",
        )
    if config.world_task:
        _world_task(config.candidates)
    rows, root = read_candidates(config.candidates) if config.candidates is not None else ([], None)
    items = _rating_items(config.items) if config.items is not None else []
    store = RatingStore(config.db, k=config.k)
    if config.candidates is not None:
        added = store.add_images(
            study_items(rows, per_attribute=config.per_attribute, per_pairing=config.per_pairing, seed=config.seed)
        )
        print(f"{added} new images in {config.db} (study 1: {store.complete(1)[1]}, study 2: {store.complete(2)[1]})")
    if items:
        added = store.add_rating_items(items)
        print(f"{added} new rating items in {config.db} ({store.rating_complete()[1]} in the rating study)")
    if config.simulate is not None:
        if rows:
            _simulate_sub(config, store, root, rows)
        if items:
            _simulate_ratings(config, store, items)
    if config.export:
        _export(config, store)
    if config.status:
        _status(store)
    url = f"http://127.0.0.1:{config.port}/"
    for name in config.annotators:
        token = store.issue_token(name, replace=config.reissue)
        print(
            f"  {name}: {url}?token={token}"
            if token
            else f"  {name}: has a personal link already (--reissue replaces it; the old one then stops working)"
        )
    if config.space_folder is not None:
        from concept_grounding.curation.annotate_space import write_space

        print(
            f"Space: {write_space(config, rows, root, Path(config.db))} (push it as a Gradio Space; "
            "annotators sign in with Hugging Face)"
        )
    if config.serves_app:
        from concept_grounding.curation.annotate_app import on_spaces, serve_app
        from concept_grounding.extras import require_extra

        require_extra("space", "concept-grounding annotate's app (without --simulate or --export)")
        if not on_spaces() and not store.token_holders():
            raise UsageError(
                "no annotator has a personal link yet: name them (--annotators ann,bob); each gets a "
                "link with a secret token",
                argument="--annotators",
            )

        paths = {candidate_id(r): r["file_name"] for r in rows}

        def image_path(item):
            p = paths[str(item.meta["candidate"])]
            return p if Path(p).is_absolute() else str(root / p)

        if config.hub_repo:
            from concept_grounding.curation.hub_sync import AnnotationSync

            AnnotationSync(
                store, repo_id=config.hub_repo, folder=Path(config.db).parent / "hub-sync", every=config.hub_every
            )
        tabs, private = [], [root] if root is not None else []
        if config.items is not None:
            from concept_grounding.curation.rating_app import rating_tab

            folder = Path(config.items)
            tabs.append(rating_tab(store, lambda name: str(folder / name)))
            private.append(folder / "truth.jsonl")
        serve_app(
            store,
            image_path,
            port=config.port,
            private=private,
            tabs=tabs,
            studies=(1, 2) if config.candidates is not None else (),
        )
    return 0


def _rating_items(folder):
    """The items of an items folder (one line naming the file on a bad one)."""
    from concept_grounding.loaders.ratings import read_rating_items

    items = read_rating_items(folder)
    if not items:
        raise UsageError(f"{folder}: the items folder has no item", argument="--items")
    return items


def _simulate_sub(config: AnnotateConfig, store, root, rows) -> None:
    """SUB's simulated annotators (of ``--simulate``'s accuracies) answer every study image, by the
    candidates' ``truth.jsonl`` or, for generated candidates without one, by what generate was
    asked (S+ applied, the reference bird kept)."""
    from pathlib import Path

    from concept_grounding.curation.simulate import SimulatedAnnotator, asked_truth, read_truth, run_annotators

    truth_file = Path(config.truth) if config.truth else root / "truth.jsonl"
    if config.truth and not truth_file.is_file():
        raise UsageError(f"--simulate: no truth file {truth_file}", argument="--truth")
    if truth_file.is_file():
        truth = read_truth(truth_file)
    else:
        truth = asked_truth(rows)
        print(
            "no truth.jsonl: the simulated annotators answer what generate was asked (S+ applied, the "
            "reference bird kept)"
        )
    anns = [SimulatedAnnotator(f"sim{i}-{a:g}", a, seed=i) for i, a in enumerate(config.simulate)]
    print(f"{run_annotators(store, anns, truth)} answers submitted by {_count(len(anns), 'simulated annotator')}")


def _simulate_ratings(config: AnnotateConfig, store, items) -> None:
    """Simulated raters (not people; one per ``--simulate`` accuracy, ``--rating-noise``) rate every
    item by the items folder's ``truth.jsonl``."""
    from concept_grounding.conceptbed.human_ratings import SimulatedRater
    from concept_grounding.curation.rating_store import run_raters
    from concept_grounding.loaders.ratings import read_rating_truth

    truth = read_rating_truth(config.items)
    lacking = sum(it.id not in truth for it in items)
    if lacking:
        raise UsageError(
            f"--simulate needs every rating item's truth: {lacking} of {len(items)} lack one in "
            f"{config.items}/truth.jsonl (export_rating_items' 'truth')",
            argument="--items",
        )
    raters = {
        r.name: r
        for r in (
            SimulatedRater(f"sim{i}-{a:g}", a, config.rating_noise, config.seed) for i, a in enumerate(config.simulate)
        )
    }
    n = run_raters(store, list(raters), lambda name, item: raters[name].rate(item, truth[item.id]))
    print(f"{n} ratings submitted by {_count(len(raters), 'simulated rater')} (not people)")


def _alpha_text(store) -> str:
    alpha = store.rating_alpha()
    return "Krippendorff's alpha (interval) " + (
        "n/a (no item has two ratings that vary)" if alpha is None else f"{alpha:.3f}"
    )


def _export(config: AnnotateConfig, store) -> None:
    """SUB's answers to ``--export`` and the ratings to it (rating study only) or beside it."""
    from pathlib import Path

    ratings = store.rating_complete()[1] > 0
    sub = bool(store.images()) or not ratings
    if sub:
        print(f"answers: {store.to_parquet(config.export)}")
    if ratings:
        path = Path(config.export)
        target = path.with_name(f"{path.stem}-ratings{path.suffix or '.parquet'}") if sub else path
        print(f"ratings: {store.ratings_to_parquet(target)} ({_alpha_text(store)})")


def _status(store) -> None:
    """Each study's completion and each annotator's progress."""
    ratings = store.rating_complete()
    if store.images() or not ratings[1]:
        for study in (1, 2):
            done, total = store.complete(study)
            print(f"study {study}: {done} of {total} images have their {_count(store.k, 'annotator')}")
        people = store.annotators()
        print(f"{_count(len(people), 'annotator')} answered so far")
        for name, counts in people.items():
            print(f"  {name}: " + ", ".join(f"study {s} {_count(n, 'image')}" for s, n in counts.items()))
    if ratings[1]:
        raters = store.raters()
        print(
            f"rating: {ratings[0]} of {ratings[1]} images have their {_count(store.k, 'rater')}; {_alpha_text(store)}; "
            f"{_count(len(raters), 'rater')} so far"
        )
        for name, n in raters.items():
            print(f"  {name}: rating {_count(n, 'image')}")


def _count(n: int, noun: str) -> str:
    """``"1 annotator"``, ``"3 annotators"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
