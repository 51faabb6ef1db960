"""The ``annotate`` settings: SUB's human studies (App. E) and ConceptBed's rating study
(App. G) over a SQLite store.

``concept-grounding annotate`` samples SUB's studies' images from ``candidates`` and adds the
rating study's items from ``items`` (:mod:`concept_grounding.loaders.ratings`) into ``db``,
and then serves the one Gradio app (:mod:`.annotate_app`, each study a tab) or, with
``simulate``, lets simulated annotators answer (:mod:`.simulate`; simulated raters for the
rating study); ``export`` / ``status`` read the store. Every flag is declared once here
(:class:`AnnotateConfig`); :mod:`.annotate_studies` runs them.

>>> accuracies("1, 0.95")
(1.0, 0.95)
>>> annotator_names("Ann, bob")
('ann', 'bob')
>>> AnnotateConfig(candidates=Path("c"), db="a.db").per_attribute
40
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..settings import setting
from ..validators import existing_dir, float_range, int_at_least, output_dir

__all__ = ["AnnotateConfig", "accuracies", "annotator_names"]


def accuracies(text: str) -> tuple[float, ...]:
    """``"1,0.97,0.95"`` -> the simulated annotators' accuracies, each in [0, 1]."""
    unit = float_range(0.0, 1.0)
    return tuple(unit(t) for t in text.split(",") if t.strip())


def annotator_names(text: str) -> tuple[str, ...]:
    """``"ann,bob"`` -> the annotator ids (:func:`~.annotation_items.annotator_id`'s rule); two
    names that are one id are refused."""
    import argparse

    from .annotation_items import AnnotationError, annotator_id

    seen: dict[str, str] = {}
    for name in (t for t in text.split(",") if t.strip()):
        try:
            who = annotator_id(name)
        except AnnotationError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if who in seen:
            raise argparse.ArgumentTypeError(
                f"{seen[who]!r} and {name!r} are one annotator id {who!r} (ids ignore case and spaces)"
            )
        seen[who] = name
    if not seen:
        raise argparse.ArgumentTypeError("name at least one annotator")
    return tuple(seen)


@dataclass(frozen=True)
class AnnotateConfig:
    """Where the studies' images come from, the store, and what to do with it (module docstring)."""

    db: str = setting(help="the annotation store (SQLite file; created when missing)")
    candidates: Path | None = setting(
        None,
        "SUB's studies: folder with metadata.jsonl (generate or filter output; --world-task writes one)",
        parse=output_dir,
    )
    items: Path | None = setting(
        None,
        "ConceptBed's rating study (1-5 ratings, App. G): an items folder (conceptbed's export_rating_items)",
        parse=existing_dir,
    )
    rating_noise: float = setting(
        0.5,
        "--simulate with --items: the simulated raters' Gaussian noise around the items' truth (rating units)",
        parse=float_range(0.0),
    )
    k: int | None = setting(
        None,
        "annotators per image of every study (default: each study's declared k, 3, for a new --db; else the one it "
        "was made with)",
        parse=int_at_least(1),
    )
    per_attribute: int = setting(40, "study-1 images per attribute", parse=int_at_least(1))
    per_pairing: int = setting(3, "study-2 images per pairing", parse=int_at_least(0))
    seed: int = setting(0, "sampling seed", parse=int)
    world_task: bool = setting(
        False,
        "first write bird-world candidates (one failed attribute, one deviating "
        "pairing, S+ = S- pairings) with their truth into --candidates",
        action="store_true",
    )
    simulate: tuple[float, ...] | None = setting(
        None,
        "no app: simulated annotators of these accuracies answer "
        "everything, by truth.jsonl or, for generated candidates without one, "
        "by what generate was asked",
        parse=accuracies,
        metavar="ACC[,ACC...]",
    )
    truth: str | None = setting(
        None,
        "the candidates' truth for --simulate (default: truth.jsonl beside "
        "--candidates' metadata.jsonl, else what generate was asked; a filter "
        "output's lies elsewhere: pass the generated folder's)",
    )
    export: str | None = setting(
        None,
        "write the answers to this Parquet file (the rating study's ratings too: "
        "to it when the store has only that study, else to NAME-ratings.parquet)",
    )
    status: bool = setting(
        False, "no app: print each study's completion and each annotator's progress", action="store_true"
    )
    annotators: tuple[str, ...] = setting(
        (),
        "give these annotators a personal link each (a secret token, stored "
        "hashed; printed once): the app serves only token holders",
        parse=annotator_names,
        metavar="NAME[,NAME...]",
    )
    reissue: bool = setting(False, "--annotators: replace their links (the old ones stop working)", action="store_true")
    space_folder: Path | None = setting(
        None,
        "no app: write a Hugging Face Space of the app here (sign-in with "
        "Hugging Face; the images and the store, never the truth)",
        parse=Path,
    )
    port: int = setting(7861, "the app's port", parse=int)
    hub_repo: str | None = setting(
        None, "also push the answers (Parquet) to this Hub dataset repo while the app runs (default: no sync)"
    )
    hub_every: float = setting(5.0, "minutes between pushes (--hub-repo)", parse=float_range(0.1))

    @property
    def serves_app(self) -> bool:
        """Whether the command serves the app (no ``simulate``, ``export`` or ``status``)."""
        return self.simulate is None and not self.export and not self.status and self.space_folder is None
