"""``concept-grounding analyse``: Aysel et al.'s CGIM 1-3, concept existence and concept location
of your post-hoc CBM on a CUB_200_2011 folder.

``--model`` is a saved :class:`~concept_grounding.models.PostHocCBM` folder (e.g. a bench
run's ``models/posthoc-cbm``) or ``file.py:factory`` / ``package.module:factory`` returning
a ``PostHocCBM`` (over any backbone: :func:`~concept_grounding.evaluation.posthoc.feature_map_posthoc_cbm`), or a
dict of its arguments (``backbone``, ``concept_vectors``, ``concept_names``, optional
``concept_intercepts``, ``theta``, ``bias``, ``features``, ``mean``, ``std``). Without a
classifier one is fitted on the training split.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run", "load_posthoc_model"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="saved PostHocCBM folder, file.py:factory or package.module:factory")
    parser.add_argument("--cub-root", required=True, help="a CUB_200_2011 folder (per-image labels and part locations)")
    parser.add_argument("--out", type=Path, default=Path("reports/analyse"), help="report folder")
    parser.add_argument("--image-size", type=int, default=None,
                        help="side (px) the images are resized to (default: a saved model's, else 224)")
    parser.add_argument("--max-images", type=int, default=None, help="only the first N test images (default: all)")
    parser.add_argument("--min-class-count", type=int, default=None,
                        help="CBM rule for the class-level labels (default: keep every attribute)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda (default: where the model is)")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


def load_posthoc_model(spec: str):
    """``(model, image size or None)`` from a ``--model`` string (module docstring)."""
    from collections.abc import Mapping

    from concept_grounding.evaluation.loading import load_factory, saved_image_size
    from concept_grounding.evaluation.posthoc import feature_map_posthoc_cbm
    from concept_grounding.models import PostHocCBM
    from concept_grounding.models.loading import load_concept_model

    path = Path(spec).expanduser()
    if path.is_dir():
        model = load_concept_model(path)
        if not isinstance(model, PostHocCBM):
            raise ValueError(f"--model {spec!r} is a {type(model).__name__}, not a post-hoc CBM (CAVs + classifier)")
        return model, saved_image_size(path)
    if ":" not in spec and (("/" in spec or "\\" in spec) or spec.startswith((".", "~"))):
        raise ValueError(f"--model {spec!r}: no such folder (a saved PostHocCBM folder, or 'file.py:factory')")
    result = load_factory(spec)()
    if isinstance(result, Mapping):
        try:
            result = feature_map_posthoc_cbm(**result)
        except TypeError as err:
            raise ValueError(f"--model {spec!r}: the factory's dict does not fit feature_map_posthoc_cbm: {err}") from None
    if not isinstance(result, PostHocCBM):
        raise ValueError(f"--model {spec!r}: the factory returned a {type(result).__name__}, not a PostHocCBM, "
                         "or a dict of feature_map_posthoc_cbm's arguments")
    return result, None


def run(args: argparse.Namespace) -> int:
    from concept_grounding.evaluation.posthoc import analyse_posthoc
    from concept_grounding.loaders import load_cub

    for name in ("batch_size", "image_size", "max_images"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    model, size = load_posthoc_model(args.model)
    if args.device:
        model.to(args.device)
    cub = load_cub(args.cub_root, min_class_count=args.min_class_count, progress=not args.no_progress)
    result = analyse_posthoc(model, cub, args.out, image_size=args.image_size or size or 224,
                             max_images=args.max_images, batch_size=args.batch_size, progress=not args.no_progress)
    cg, ex = result.cgim, result.existence
    print(f"CGIM concept type 1/2/3: {cg.get('concept_type1'):.3f} / {cg.get('concept_type2'):.3f} / "
          f"{cg.get('concept_type3'):.3f}; existence@1 {ex.get('existence@1'):.3f}; "
          f"class accuracy {result.class_accuracy:.3f}")
    print(f"wrote {args.out / 'report.md'}")
    return 0
