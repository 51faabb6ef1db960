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
from concept_grounding.bench.analyse_job import AnalyseConfig, run_analyse
from concept_grounding.jobs import Job, add_out_argument

__all__ = ["JOB", "add_arguments", "run", "config_from_args", "load_posthoc_model"]

#: ``config -> run -> result -> save`` (:mod:`concept_grounding.jobs`)
JOB = Job("analyse", AnalyseConfig, run_analyse)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` (loaded before the config is built), ``--out`` and the settings
    :class:`~concept_grounding.bench.analyse_job.AnalyseConfig` declares."""
    parser.add_argument(
        "--model",
        default=None,
        help="saved PostHocCBM folder, file.py:factory or package.module:factory "
        "(default: train one on the training split as the paper does)",
    )
    add_out_argument(parser, help="report folder", default="reports/analyse")
    settings.add_arguments(parser, AnalyseConfig)


def load_posthoc_model(spec: str):
    """``(model, image size or None)`` from a ``--model`` string (module docstring)."""
    from collections.abc import Mapping

    from concept_grounding.evaluation.loading import load_factory, saved_image_size
    from concept_grounding.evaluation.posthoc import feature_map_posthoc_cbm
    from concept_grounding.hub import resolve_model_spec
    from concept_grounding.models import PostHocCBM
    from concept_grounding.models.loading import load_concept_model

    resolved = resolve_model_spec(spec, "--model", accept=("folder", "factory"))
    if resolved.kind == "folder":
        path = Path(resolved.target)
        model = load_concept_model(path)
        if not isinstance(model, PostHocCBM):
            raise ValueError(f"--model {spec!r} is a {type(model).__name__}, not a post-hoc CBM (CAVs + classifier)")
        return model, saved_image_size(path)
    result = load_factory(resolved.target)()
    if isinstance(result, Mapping):
        try:
            result = feature_map_posthoc_cbm(**result)
        except TypeError as err:
            raise ValueError(
                f"--model {spec!r}: the factory's dict does not fit feature_map_posthoc_cbm: {err}"
            ) from None
    if not isinstance(result, PostHocCBM):
        raise ValueError(
            f"--model {spec!r}: the factory returned a {type(result).__name__}, not a PostHocCBM, "
            "or a dict of feature_map_posthoc_cbm's arguments"
        )
    return result, None


def config_from_args(args: argparse.Namespace) -> AnalyseConfig:
    """The job's configuration: sizes checked, then ``--model`` loaded (:func:`load_posthoc_model`)."""
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
    model, size = load_posthoc_model(args.model) if args.model else (None, None)
    return settings.from_args(AnalyseConfig, args, model=model, model_image_size=size)


def run(args: argparse.Namespace) -> int:
    result = JOB.run(config_from_args(args))
    report = result.save(args.out)
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
    return 0
