"""What ``concept-grounding annotate`` does with its :class:`~.annotate_job.AnnotateConfig` (SUB App. E,
ConceptBed App. G; docs/human_validation.md): :func:`open_studies` checks the flags, fills the store and does
what the config asks besides serving (simulated answers, the export, the status, the annotators' links, the
Space folder); :func:`serve_studies` serves the app. Both say what they did through ``echo`` (the command's
``print``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .annotate_job import AnnotateConfig

__all__ = ["Studies", "open_studies", "serve_studies"]

#: SUB's two studies (App. E) and ConceptBed's rating study (App. G), by their names in the store.
SUB: tuple[str, ...] = ("sub-1", "sub-2")
RATING = "conceptbed-rating"

#: where a status line goes (the command passes ``print``)
Echo = Callable[[str], Any]
#: ``(name, accuracy, noise, seed) -> rater`` with ``rate(item, truth)``: a simulated rater of the rating
#: study (the command passes ConceptBed's ``SimulatedRater``, of a package above this one)
RaterFactory = Callable[[str, float, float, int], Any]


@dataclass
class Studies:
    """The store and what was read into it: SUB's candidate ``rows`` (under ``root``) and the rating ``items``."""

    store: Any
    rows: list[dict] = field(default_factory=list)
    root: Path | None = None
    items: list[Any] = field(default_factory=list)


def check_config(config: AnnotateConfig) -> None:
    """The combinations of flags that cannot work, before anything is read or written."""
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


def write_world_task(folder: Path) -> None:
    """Bird-world candidates with known failures and their truth, into ``folder`` (``--world-task``)."""
    from .simulate import WorldTask, broken_task, world_candidates, write_candidates

    world = WorldTask().world()
    write_candidates(world_candidates(broken_task(WorldTask(), world), world), folder, world)


def open_studies(config: AnnotateConfig, echo: Echo, rater: RaterFactory | None = None) -> Studies:
    """Check ``config``, fill the store (SUB's study images, the rating items), then what it asks besides the app:
    simulated answers (``rater`` makes the rating study's raters), the Parquet export, the status, the annotators'
    links and the Space folder."""
    from .curate_inputs import read_candidates
    from .sampling import study_items
    from .study import rating_record, sub_records
    from .study_store import StudyStore

    check_config(config)
    if config.world_task:
        write_world_task(config.candidates)
    rows, root = read_candidates(config.candidates) if config.candidates is not None else ([], None)
    items = rating_items(config.items) if config.items is not None else []
    store = StudyStore(config.db, k=config.k)  # created once every input has been read
    studies = Studies(store, rows, root, items)
    if config.candidates is not None:
        items = study_items(rows, per_attribute=config.per_attribute, per_pairing=config.per_pairing, seed=config.seed)
        added = sum(store.add_records(s, records) for s, records in sub_records(items).items())
        echo(
            f"{added} new images in {config.db} (study 1: {store.complete(SUB[0])[1]}, "
            f"study 2: {store.complete(SUB[1])[1]})"
        )
    if studies.items:
        added = store.add_records(RATING, [rating_record(it) for it in studies.items])
        echo(f"{added} new rating items in {config.db} ({store.complete(RATING)[1]} in the rating study)")
    if config.simulate is not None:
        if rows:
            simulate_sub(config, studies, echo)
        if studies.items:
            if rater is None:
                raise ValueError("rater: the rating study's simulated raters need a rater factory")
            simulate_ratings(config, studies, rater, echo)
    if config.export:
        export(config, store, echo)
    if config.status:
        status(store, echo)
    _issue_links(config, store, echo)
    if config.space_folder is not None:
        from .annotate_space import write_space

        echo(
            f"Space: {write_space(config, rows, root, Path(config.db))} (push it as a Gradio Space; "
            "annotators sign in with Hugging Face)"
        )
    return studies


def _issue_links(config: AnnotateConfig, store: Any, echo: Echo) -> None:
    """Each ``--annotators`` name's personal link (printed once; ``--reissue`` replaces it)."""
    url = f"http://127.0.0.1:{config.port}/"
    for name in config.annotators:
        token = store.issue_token(name, replace=config.reissue)
        echo(
            f"  {name}: {url}?token={token}"
            if token
            else f"  {name}: has a personal link already (--reissue replaces it; the old one then stops working)"
        )


def serve_studies(config: AnnotateConfig, studies: Studies) -> None:
    """Serve the one app over the store to its token holders (SUB's studies, the rating study); with ``hub_repo``,
    push the answers to the Hub as they come."""
    from ..extras import require_extra
    from .annotate_app import on_spaces
    from .annotate_serve import serve_app
    from .sampling import candidate_id
    from .study import CONCEPTBED_RATING, SUB_STUDY_1, SUB_STUDY_2, Record
    from .study_store import StudyStore

    require_extra("space", "concept-grounding annotate's app (without --simulate or --export)")
    root = studies.root
    store = StudyStore(config.db)
    if not on_spaces() and not store.token_holders():
        raise UsageError(
            "no annotator has a personal link yet: name them (--annotators ann,bob); each gets a "
            "link with a secret token",
            argument="--annotators",
        )
    paths = {candidate_id(r): r["file_name"] for r in studies.rows}
    items = Path(config.items) if config.items is not None else None

    def file_path(record: Record, name: str) -> Path:
        """A SUB record's field names its candidate (the file from metadata.jsonl), a rating record's its file."""
        if record.study == CONCEPTBED_RATING.name and items is not None:
            return items / name
        p = Path(paths[name])
        return p if p.is_absolute() else root / p

    if config.hub_repo:
        from .hub_sync import AnnotationSync

        AnnotationSync(
            store, repo_id=config.hub_repo, folder=Path(config.db).parent / "hub-sync", every=config.hub_every
        )
    shown = [SUB_STUDY_1, SUB_STUDY_2] if config.candidates is not None else []
    private = [root] if root is not None else []
    if items is not None:
        shown.append(CONCEPTBED_RATING)
        private.append(items / "truth.jsonl")
    serve_app(store, file_path, port=config.port, private=private, studies=shown)


def rating_items(folder: Path) -> list[Any]:
    """The items of an items folder (one line naming the file on a bad one)."""
    from ..loaders.ratings import read_rating_items

    items = read_rating_items(folder)
    if not items:
        raise UsageError(f"{folder}: the items folder has no item", argument="--items")
    return items


def simulate_sub(config: AnnotateConfig, studies: Studies, echo: Echo) -> None:
    """SUB's simulated annotators (of ``--simulate``'s accuracies) answer every study image, by the
    candidates' ``truth.jsonl`` or, for generated candidates without one, by what generate was
    asked (S+ applied, the reference bird kept)."""
    from .simulate import SimulatedAnnotator, asked_truth, read_truth, simulate_sub

    truth_file = Path(config.truth) if config.truth else studies.root / "truth.jsonl"
    if config.truth and not truth_file.is_file():
        raise UsageError(f"--simulate: no truth file {truth_file}", argument="--truth")
    if truth_file.is_file():
        truth = read_truth(truth_file)
    else:
        truth = asked_truth(studies.rows)
        echo(
            "no truth.jsonl: the simulated annotators answer what generate was asked (S+ applied, the "
            "reference bird kept)"
        )
    anns = [SimulatedAnnotator(f"sim{i}-{a:g}", a, seed=i) for i, a in enumerate(config.simulate)]
    n = simulate_sub(studies.store, anns, truth)
    echo(f"{n} answers submitted by {_count(len(anns), 'simulated annotator')}")


def simulate_ratings(config: AnnotateConfig, studies: Studies, rater: RaterFactory, echo: Echo) -> None:
    """Simulated raters (not people; one per ``--simulate`` accuracy, ``--rating-noise``) rate every
    item by the items folder's ``truth.jsonl``."""
    from ..loaders.ratings import read_rating_truth
    from .simulate import run_annotators
    from .study import rating_item

    items = studies.items
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
        for r in (rater(f"sim{i}-{a:g}", a, config.rating_noise, config.seed) for i, a in enumerate(config.simulate))
    }
    n = run_annotators(
        studies.store,
        RATING,
        list(raters),
        lambda name, record: {"rating": raters[name].rate(rating_item(record), truth[record.id])},
    )
    echo(f"{n} ratings submitted by {_count(len(raters), 'simulated rater')} (not people)")


def _alpha_text(store: Any) -> str:
    from .agreement import study_alpha
    from .study import CONCEPTBED_RATING

    alpha = study_alpha(CONCEPTBED_RATING, store.responses(RATING))["rating"]
    return "Krippendorff's alpha (interval) " + (
        "n/a (no item has two ratings that vary)" if alpha is None else f"{alpha:.3f}"
    )


def export(config: AnnotateConfig, store: Any, echo: Echo) -> None:
    """SUB's answers to ``--export`` and the ratings to it (rating study only) or beside it."""
    ratings = store.complete(RATING)[1] > 0
    sub = _has_sub(store) or not ratings
    if sub:
        echo(f"answers: {store.to_parquet(SUB, config.export)}")
    if ratings:
        path = Path(config.export)
        target = path.with_name(f"{path.stem}-ratings{path.suffix or '.parquet'}") if sub else path
        echo(f"ratings: {store.to_parquet(RATING, target)} ({_alpha_text(store)})")


def status(store: Any, echo: Echo) -> None:
    """Each study's completion and each annotator's progress."""
    ratings = store.complete(RATING)
    answered = store.annotators()
    if _has_sub(store) or not ratings[1]:
        for number, study in enumerate(SUB, 1):
            done, total = store.complete(study)
            echo(f"study {number}: {done} of {total} images have their {_count(store.k_of(study), 'annotator')}")
        people = {name: {s: n for s, n in counts.items() if s in SUB} for name, counts in answered.items()}
        people = {name: counts for name, counts in people.items() if counts}
        echo(f"{_count(len(people), 'annotator')} answered so far")
        for name, counts in people.items():
            echo(f"  {name}: " + ", ".join(f"study {s[-1]} {_count(n, 'image')}" for s, n in counts.items()))
    if ratings[1]:
        raters = {name: counts[RATING] for name, counts in answered.items() if RATING in counts}
        echo(
            f"rating: {ratings[0]} of {ratings[1]} images have their {_count(store.k_of(RATING), 'rater')}; "
            f"{_alpha_text(store)}; {_count(len(raters), 'rater')} so far"
        )
        for name, n in raters.items():
            echo(f"  {name}: rating {_count(n, 'image')}")


def _has_sub(store: Any) -> bool:
    """Whether the store holds records of SUB's studies."""
    return any(store.complete(s)[1] for s in SUB)


def _count(n: int, noun: str) -> str:
    """``"1 annotator"``, ``"3 annotators"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
