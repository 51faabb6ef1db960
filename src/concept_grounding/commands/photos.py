"""``concept-grounding photos``: real animal photos on real backgrounds, with exact masks.

Fetches Tux Paint's animal stamps (Debian's ``tuxpaint-stamps-default``, GPL-2) into the
user's cache on first use, composes each on real backgrounds and writes ``OUT/images`` (an
ImageNet-style folder with ``masks/``), ``OUT/counteranimals/{easy,hard}``, ``photos.json``
and ``README.md`` (licences). The job lives in :mod:`concept_grounding.photos.export`.
"""

from __future__ import annotations

import argparse

from concept_grounding import settings
from concept_grounding.jobs import Job, add_job_arguments
from concept_grounding.photos.export import PhotosConfig, run_photos

__all__ = ["JOB", "add_arguments", "run"]

JOB = Job("photos", PhotosConfig, run_photos)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser, JOB, out_help="output folder (images/, counteranimals/, README.md)")


def run(args: argparse.Namespace) -> int:
    from concept_grounding.progress import log_lines

    with log_lines():
        result = JOB.run(settings.from_args(PhotosConfig, args, out=args.out))
        result.save(args.out)
    print(
        f"wrote {len(result.records)} images to {result.image_folder} and {result.out / 'counteranimals'} "
        f"in {result.seconds:.1f} s"
    )
    return 0
