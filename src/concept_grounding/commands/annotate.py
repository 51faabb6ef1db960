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

The studies' logic lives in :mod:`concept_grounding.curation.annotate_studies`; this module declares the flags,
prints and hands ConceptBed's simulated raters to the rating study.
"""

from __future__ import annotations

import argparse

from concept_grounding import settings
from concept_grounding.curation.annotate_job import AnnotateConfig
from concept_grounding.curation.annotate_studies import open_studies, serve_studies

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    settings.add_arguments(parser, AnnotateConfig)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.conceptbed.human_ratings import SimulatedRater

    config: AnnotateConfig = settings.from_args(AnnotateConfig, args)
    studies = open_studies(config, echo=print, rater=SimulatedRater)
    if config.serves_app:
        serve_studies(config, studies)
    return 0
