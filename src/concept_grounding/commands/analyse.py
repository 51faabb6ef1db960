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
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.settings import add_option
from concept_grounding.commands._types import (
    class_name, closed_unit_interval, existing_dir, int_at_least, positive_float, positive_int,
)

__all__ = ["add_arguments", "run", "load_posthoc_model"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="saved PostHocCBM folder, file.py:factory or package.module:factory "
                             "(default: train one on the training split as the paper does)")
    parser.add_argument("--cub-root", type=existing_dir, default=None,
                        help="a CUB_200_2011 folder (per-image labels and part locations; default: the bird world)")
    parser.add_argument("--out", type=Path, default=Path("reports/analyse"), help="report folder")
    add_option(parser, "--size", "--image-size", dest="image_size", type=int_at_least(32), default=None,
               help="side (px) the images are resized to (default: a saved model's, else 224 on CUB, 64 on the world)")
    parser.add_argument("--max-images", type=int, default=None, help="only the first N test images (default: all)")
    parser.add_argument("--min-class-count", type=int, default=None,
                        help="CBM rule for the class-level labels (default: keep every attribute)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda (default: where the model is)")
    parser.add_argument("--sweep", action="store_true",
                        help="Table 3: relearn the CAVs for every --sweep-c x --sweep-n and fit the classifier again, "
                             "plus the no-bottleneck baseline")
    parser.add_argument("--sweep-c", type=positive_float, nargs="+", default=[0.001, 0.01, 0.1, 1.0, 10.0],
                        help="SVM regularisation values (the paper's lambda)")
    parser.add_argument("--sweep-n", type=positive_int, nargs="+", default=[50, 100], help="N_p = N_n values")
    parser.add_argument("--coam-threshold", type=closed_unit_interval, default=0.5,
                        help="Algorithm 2's binary threshold on the min-max scaled CoAM")
    parser.add_argument("--epochs", type=positive_int, default=8, help="backbone epochs when no --model is given")
    parser.add_argument("--classes", nargs="*", type=class_name, default=None,
                        help="world classes (CUB folder names; default the world's)")
    parser.add_argument("--train-per-class", type=positive_int, default=30, help="world training images per class")
    parser.add_argument("--test-per-class", type=positive_int, default=10, help="world test images per class")
    parser.add_argument("--seed", type=int, default=0, help="seed of the world, the training and the galleries")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


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
            raise ValueError(f"--model {spec!r}: the factory's dict does not fit feature_map_posthoc_cbm: {err}") from None
    if not isinstance(result, PostHocCBM):
        raise ValueError(f"--model {spec!r}: the factory returned a {type(result).__name__}, not a PostHocCBM, "
                         "or a dict of feature_map_posthoc_cbm's arguments")
    return result, None


def load_data(args: argparse.Namespace, image_size: int):
    """``--cub-root`` loaded with :func:`~concept_grounding.loaders.load_cub`, else the world rendered."""
    if args.cub_root is not None:
        from concept_grounding.loaders import load_cub

        return load_cub(args.cub_root, min_class_count=args.min_class_count, progress=not args.no_progress)
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=image_size, seed=args.seed,
                                  class_names=tuple(args.classes) if args.classes else None))
    return world.to_dataset_dict(args.train_per_class, args.test_per_class, progress=not args.no_progress)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.evaluation.posthoc import analyse_posthoc, default_concept_columns, train_default_posthoc
    from concept_grounding.vocabulary import load_vocabulary

    for name in ("batch_size", "image_size", "max_images"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    model, size = load_posthoc_model(args.model) if args.model else (None, None)
    image_size = args.image_size or size or (224 if args.cub_root else 64)
    cub = load_data(args, image_size)
    if model is None:
        columns = default_concept_columns(cub["train"], load_vocabulary())
        model = train_default_posthoc(cub["train"], columns, image_size, epochs=args.epochs, seed=args.seed,
                                      progress=not args.no_progress)
    if args.device:
        model.to(args.device)
    result = analyse_posthoc(model, cub, args.out, image_size=image_size, max_images=args.max_images,
                             batch_size=args.batch_size, progress=not args.no_progress, sweep=args.sweep,
                             sweep_Cs=args.sweep_c, sweep_sizes=args.sweep_n, coam_threshold=args.coam_threshold,
                             seed=args.seed)
    cg, ex = result.cgim, result.existence
    print(f"CGIM concept type 1/2/3: {cg.get('concept_type1'):.3f} / {cg.get('concept_type2'):.3f} / "
          f"{cg.get('concept_type3'):.3f}; existence@1 {ex.get('existence@1'):.3f}; "
          f"class accuracy {result.class_accuracy:.3f}")
    if result.sweep is not None:
        print(f"Table 3: best {max(r['accuracy'] for r in result.sweep.rows):.3f}, "
              f"no bottleneck {result.sweep.no_bottleneck_accuracy:.3f}")
    print(f"wrote {args.out / 'report.md'}")
    return 0
