"""``concept-grounding analyse``: Aysel et al.'s analysis of a post-hoc CBM, every table of
the paper: CGIM 1-3 (Fig. 2, Tables 6-8), concept existence (Table 1) and concept location
(Table 2) for the three rankings theta, u-hat and theta x u-hat on all and on correctly
classified test images, the lambda x N_p/N_n sweep with the no-bottleneck baseline
(Table 3, ``--sweep``), the CoAM galleries with existence marks and class-wise maps
(Figs. 3-4) and Algorithm 2's binary overlays.

Data: the bird world by default (rendered, exact truth), or ``--cub-root`` a CUB_200_2011
folder. ``--model`` is a saved :class:`~concept_grounding.models.PostHocCBM` folder (e.g. a
bench run's ``models/posthoc-cbm``) or ``file.py:factory`` / ``package.module:factory``
returning a ``PostHocCBM`` (over any backbone:
:func:`~concept_grounding.evaluation.posthoc.feature_map_posthoc_cbm`), or a dict of its
arguments (``backbone``, ``concept_vectors``, ``concept_names``, optional
``concept_intercepts``, ``theta``, ``bias``, ``features``, ``mean``, ``std``). Without a
classifier one is fitted on the training split. Without ``--model`` one is trained as the
paper does (a backbone on the class labels, CAVs with ``N_p = N_n = 100``, ``C = 1`` on
Koh et al.'s 112 concepts, the sparse classifier).

``--photos DIR`` (a ``concept-grounding photos`` folder) with ``--model efficientnet_lite0`` (or
no ``--model``): the post-hoc CBM on EfficientNet-Lite0's ImageNet feature map, its CAVs learned from
the animals' class-level concepts (:mod:`concept_grounding.photos.concepts`); CGIM and concept
existence as above, concept location for the body coverings at each mask's body point.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.evaluation.analyse_job import AnalyseConfig, AnalyseResult, run_analyse
from concept_grounding.jobs import Job, add_out_argument

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

#: ``config -> run -> result -> save`` (:mod:`concept_grounding.jobs`)
JOB = Job("analyse", AnalyseConfig, run_analyse)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` (loaded before the config is built), ``--out`` and the settings
    :class:`~concept_grounding.evaluation.analyse_job.AnalyseConfig` declares."""
    parser.add_argument(
        "--model",
        default=None,
        help="saved PostHocCBM folder, file.py:factory or package.module:factory "
        "(default: train one on the training split as the paper does)",
    )
    add_out_argument(parser, help="report folder", default="reports/analyse")
    settings.add_arguments(parser, AnalyseConfig)


def config_from_args(args: argparse.Namespace) -> AnalyseConfig:
    """The job's configuration: sizes checked, then ``--model`` loaded
    (:func:`~concept_grounding.evaluation.loading.load_posthoc_model`)."""
    for name in ("batch_size", "image_size", "max_images"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    from concept_grounding.hub import IMAGENET_CLASSIFIERS

    if args.model in IMAGENET_CLASSIFIERS:
        if args.photos is None:
            raise ValueError(
                f"--model {args.model} (an ImageNet classifier, no post-hoc CBM) needs --photos DIR: "
                "the CBM is built on its features with the photos' class-level concepts"
            )
        return settings.from_args(AnalyseConfig, args, imagenet=args.model)
    from concept_grounding.evaluation.loading import load_posthoc_model

    model, size = load_posthoc_model(args.model) if args.model else (None, None)
    return settings.from_args(AnalyseConfig, args, model=model, model_image_size=size)


def run(args: argparse.Namespace) -> int:
    JOB(config_from_args(args), args.out, report=_print)
    return 0


def _print(result: AnalyseResult, report: Path) -> None:
    """The headline numbers (CGIM, existence@1, class accuracy; Table 3's best) and the report written."""
    a = result.analysis.result
    cg, ex = a.cgim, a.existence
    print(
        f"CGIM concept type 1/2/3: {cg.get('concept_type1'):.3f} / {cg.get('concept_type2'):.3f} / "
        f"{cg.get('concept_type3'):.3f}; existence@1 {ex.get('existence@1'):.3f}; "
        f"class accuracy {a.class_accuracy:.3f}"
    )
    if a.sweep is not None:
        print(
            f"Table 3: best {max(r['accuracy'] for r in a.sweep.rows):.3f}, "
            f"no bottleneck {a.sweep.no_bottleneck_accuracy:.3f}"
        )
    print(f"wrote {report}")
