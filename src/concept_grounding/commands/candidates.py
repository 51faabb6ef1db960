"""``concept-grounding candidates classes|attributes|plan``: SUB's candidate selection (Sec. 4.2).

* ``classes``: 20 generated images per class (``--images``, a folder with ``metadata.jsonl``;
  default: world renders) named by ``--classifier`` (default: the world judge's species
  head); a class is kept at ``--min-accuracy`` (1.0) -> ``classes.json`` / ``classes.md``.
* ``attributes``: a VQA ``--scorer`` on a CUB tree (``--cub-root``; default: world renders
  with their exact labels); an attribute is kept at ``--min-accuracy`` (0.90) at its best
  answer-probability threshold in 0.60-0.95 -> ``attributes.json`` / ``.md`` / ``.png``.
* ``plan``: the kept classes x kept attributes each class lacks -> ``pairings.jsonl``, which
  ``concept-grounding generate --pairings`` reads (S-, guide bird, N per pairing).

The paper's settings are the defaults. Errors name these flags.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.settings import add_option

from ._types import attribute_name, class_name, closed_unit_interval, existing_dir, existing_file, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP", parser_class=type(parser))
    step = dict(formatter_class=parser.formatter_class)
    classes = steps.add_parser("classes", help="reference classes a classifier recognises in generated images", **step)
    classes.add_argument("--images", type=existing_dir, default=None,
                         help="folder of generated images with metadata.jsonl {file_name, reference_class} "
                              "(default: world renders, --per-class per class)")
    classes.add_argument("--generate", choices=("world", "tiny"), default=None,
                         help="generate the images with a Flux prompted 'A photo of a {class}' (SUB Sec. 4.2): the "
                              "shipped world Flux or the tiny random one (default: world renders)")
    classes.add_argument("--flux-model", default=None,
                         help="a FLUX Hub id or folder to generate with instead (--generate's pretrained form)")
    classes.add_argument("--steps", type=positive_int, default=28, help="denoising steps of --generate / --flux-model")
    classes.add_argument("--classifier", default=None,
                         help="world-judge (default), a saved world-judge folder, file.py:factory / module:factory "
                              "(returns images -> CUB class names or indices), or a transformers image classifier")
    classes.add_argument("--per-class", type=positive_int, default=20, help="world renders per class")
    classes.add_argument("--classes", nargs="*", type=class_name, default=None, help="world classes (default: SUB's 33)")
    classes.add_argument("--min-accuracy", type=closed_unit_interval, default=1.0, help="keep a class at this accuracy")
    _common(classes)

    attributes = steps.add_parser("attributes", help="attributes a VQA scorer answers reliably on CUB images", **step)
    attributes.add_argument("--cub-root", type=existing_dir, default=None,
                            help="a CUB_200_2011 tree (per-image labels; default: world renders with exact labels)")
    attributes.add_argument("--scorer", choices=("world-judge", "vlm", "clip", "tiny-clip", "oracle"),
                            default="world-judge", help="the VQA scorer (as in `filter`)")
    attributes.add_argument("--vlm-model", default=None, help="transformers VLM id or folder (--scorer vlm)")
    attributes.add_argument("--trust-remote-code", action="store_true", help="let --vlm-model run its own code")
    attributes.add_argument("--clip-model", default="ViT-B-32", help="open_clip architecture (--scorer clip)")
    attributes.add_argument("--clip-pretrained", default="openai", help="open_clip weights tag (--scorer clip)")
    attributes.add_argument("--oracle", default=None, help="'module:function' or a concept model folder (--scorer oracle)")
    attributes.add_argument("--attributes", nargs="*", type=attribute_name, default=None, help="attributes to assess (default: all 312)")
    attributes.add_argument("--per-class", type=positive_int, default=10, help="world renders per class")
    attributes.add_argument("--min-accuracy", type=closed_unit_interval, default=0.9,
                            help="keep an attribute at this accuracy at its best threshold")
    attributes.add_argument("--metric", choices=("balanced", "accuracy"), default="balanced",
                            help="balanced (mean of TPR and TNR) or plain accuracy over all images")
    _common(attributes)

    plan = steps.add_parser("plan", help="kept classes x kept attributes -> a pairings file for `generate`", **step)
    plan.add_argument("--classes-file", type=existing_file, required=True, help="classes.json of `candidates classes`")
    plan.add_argument("--attributes-file", type=existing_file, required=True, help="attributes.json of `candidates attributes`")
    plan.add_argument("--cub-root", type=existing_dir, default=None,
                      help="CUB_200_2011 tree whose class-level labels give S- (default: the world's)")
    plan.add_argument("--images-per-pairing", type=positive_int, default=None,
                      help="N written into every pairing (default: generate's --images-per-pairing)")
    plan.add_argument("--out", type=Path, default=Path("reports/candidates"), help="report folder")
    plan.add_argument("--world-seed", type=int, default=0, help="world seed (class table)")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("reports/candidates"), help="report folder")
    add_option(parser, "--size", "--world-size", dest="world_size", type=positive_int, default=None,
               help="world renders: side in px (default: 32, the shipped world Flux's and judge's)")
    parser.add_argument("--world-seed", type=int, default=0, help="world renders: seed")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="images per classifier / scorer call")
    parser.add_argument("--device", default="cpu", help="device of a transformers model")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


def run(args: argparse.Namespace) -> int:
    return {"classes": _classes, "attributes": _attributes, "plan": _plan}[args.step](args)


def _classes(args: argparse.Namespace) -> int:
    from concept_grounding.curation.candidates import (
        as_classifier,
        load_classifier,
        read_class_images,
        run_class_candidates,
        world_class_images,
    )

    if args.images is not None:
        images, labels, names = read_class_images(args.images)
    elif args.generate or args.flux_model:
        from concept_grounding.extras import require_extra

        require_extra("tdg", "concept-grounding candidates classes --generate")
        from concept_grounding.curation.candidates import generated_class_images
        from concept_grounding.vocabulary import load_vocabulary

        names = tuple(args.classes) if args.classes else load_vocabulary().sub_classes
        images, labels, names = generated_class_images(_flux_source(args), names, args.per_class, args.steps,
                                                       seed=args.world_seed, size=args.world_size,
                                                       progress=not args.no_progress)
    else:
        images, labels, names = world_class_images(args.classes, args.per_class, args.world_size, args.world_seed)
    spec = args.classifier
    if spec and ":" in spec and not Path(spec).exists():  # file.py:factory or module:factory
        from concept_grounding.errors import UsageError
        from concept_grounding.evaluation.loading import load_factory

        predict = load_factory(spec, "--classifier")()
        if not callable(predict):
            raise UsageError(f"{spec!r} must return a callable images -> class predictions", argument="--classifier")
        classifier = as_classifier(predict, names)
    else:
        classifier = load_classifier(spec, names, args.device)
    selection = run_class_candidates(images, labels, names, classifier, args.out, args.min_accuracy,
                                     args.batch_size, not args.no_progress)
    print(f"{len(selection.kept)} of {len(names)} classes kept; wrote {args.out / 'classes.md'}")
    return 0


def _flux_source(args: argparse.Namespace):
    """The Flux of ``--generate`` / ``--flux-model`` (resolved, not loaded)."""
    if args.flux_model:
        from concept_grounding.tdg.sources import PretrainedFlux

        return PretrainedFlux(args.flux_model, argument="--flux-model")
    if args.generate == "tiny":
        from concept_grounding.testing.flux import TinyFlux

        return TinyFlux()
    from concept_grounding.worldflux.source import WorldFlux

    return WorldFlux()


def _attributes(args: argparse.Namespace) -> int:
    from concept_grounding.curation.candidates import (
        cub_attribute_data,
        run_attribute_candidates,
        world_attribute_data,
        world_judge_scorer,
    )
    from concept_grounding.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    if args.scorer == "world-judge":
        scorer = world_judge_scorer()
    else:
        from concept_grounding.models.loading import concept_probability_oracle
        from concept_grounding.tdg.filter_job import DEFAULT_VLM, FilterConfig, build_scorer

        config = FilterConfig(input=Path("."), out=Path(args.out), scorer=args.scorer,
                              vlm_model=args.vlm_model or DEFAULT_VLM, trust_remote_code=args.trust_remote_code,
                              clip_model=args.clip_model, clip_pretrained=args.clip_pretrained, oracle=args.oracle,
                              oracle_loader=concept_probability_oracle)
        scorer = build_scorer(config)  # named models resolved first: a bad name fails before the images load
    if args.cub_root is not None:
        images, labels = cub_attribute_data(args.cub_root, progress=not args.no_progress)
    else:
        images, labels = world_attribute_data(args.per_class, args.world_size, args.world_seed)
    result = run_attribute_candidates(images, labels, scorer, args.out, args.attributes, min_accuracy=args.min_accuracy,
                                      metric=args.metric, batch_size=args.batch_size, progress=not args.no_progress,
                                      vocab=vocab)
    kept = result.selection.kept
    print(f"{len(kept)} of {len(result.selection.attributes)} attributes kept; wrote {args.out / 'attributes.md'}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from concept_grounding.curation.candidates import run_candidate_plan

    if args.cub_root is not None:
        from concept_grounding.bench.data import class_matrix
        from concept_grounding.loaders import load_cub
        from concept_grounding.vocabulary import load_vocabulary

        train = load_cub(args.cub_root, min_class_count=None, progress=False)["train"]
        names = tuple(train.features["label"].names)
        table = class_matrix(train, len(names), load_vocabulary().num_attributes)
    else:
        from concept_grounding.curation.candidates import candidate_world

        world = candidate_world(seed=args.world_seed)
        names, table = tuple(world.class_names), world.class_attributes
    pairings = run_candidate_plan(args.classes_file, args.attributes_file, names, table, args.out,
                                  args.images_per_pairing)
    print(f"{len(pairings)} pairings; wrote {args.out / 'pairings.jsonl'}")
    return 0
